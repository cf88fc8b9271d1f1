// Where a device's sliding-window KV caches start, per slot (graph/kv_window.h), advanced with
// each step: what every device kind with such caches shares.
#pragma once

#include "device/device.h"
#include "graph/graph.h"
#include "parallel/plan.h"

#include <cstdint>
#include <vector>

namespace weft::device {

class KvWindows {
 public:
  KvWindows() = default;
  KvWindows(const graph::Dims& d, const LoadOptions& opt);
  // Whether the model's windowed layers keep fewer rows per slot than the context.
  bool active() const { return rows_ < n_ctx_; }
  // Rows per slot of a windowed layer's cache (the context when not active).
  int64_t rows() const { return rows_; }
  const std::vector<int64_t>& base() const { return base_; }
  // The first position slot `slot` can continue from (graph::kv_window_floor).
  int64_t floor(int32_t slot) const;
  // The bases this step leaves each slot at (a cache moves its rows there before it writes);
  // throws weft::Error(where, ...) for a sequence that starts below its slot's floor.
  std::vector<int64_t> advance(const Step& step, const char* where) const;
  // What a windowed cache moves before this step writes, given advance()'s bases: per slot whose
  // window moves on, the n_rows rows from src_row go to row 0 (of each kv head's rows).
  struct Move {
    int32_t seq;
    int64_t src_row, n_rows;
  };
  std::vector<Move> moves(const Step& step, const std::vector<int64_t>& next) const;
  void commit(std::vector<int64_t> next) { base_ = std::move(next); }

 private:
  int64_t n_swa_ = 0, n_ctx_ = 0, rows_ = 0;
  std::vector<int64_t> base_;
};

// The Attention node whose KV caches Attention node `node` of `g` reads: itself, or (a layer
// attending over an earlier layer's cache, graph::Dims::kv_source) that layer's, which comes
// before it; throws weft::Error(where, ...) where the graph lacks it.
int kv_cache_node(const parallel::DeviceGraph& g, int node, const char* where);

}  // namespace weft::device
