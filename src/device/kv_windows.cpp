#include "device/kv_windows.h"

#include "core/error.h"
#include "graph/kv_window.h"

namespace weft::device {

KvWindows::KvWindows(const graph::Dims& d, const LoadOptions& opt)
    : n_swa_(d.n_swa),
      n_ctx_(opt.n_ctx),
      rows_(d.n_swa > 0 ? graph::kv_window_rows(opt.n_ctx, d.n_swa, opt.max_tokens) : opt.n_ctx),
      base_(opt.n_seq, 0) {}

int64_t KvWindows::floor(int32_t slot) const { return graph::kv_window_floor(base_[slot], n_swa_); }

std::vector<KvWindows::Move> KvWindows::moves(const Step& step, const std::vector<int64_t>& next) const {
  std::vector<Move> out;
  for (const StepSeq& q : step.seqs) {
    const int64_t from = base_[q.seq], to = next[q.seq];
    if (q.pos0 == 0 || to == from || q.pos0 <= to) continue;  // started over, not moved, or nothing kept
    out.push_back({q.seq, to - from, q.pos0 - to});
  }
  return out;
}

std::vector<int64_t> KvWindows::advance(const Step& step, const char* where) const {
  std::vector<int64_t> next = base_;
  if (!active()) return next;
  for (const StepSeq& q : step.seqs) {
    const int64_t base = q.pos0 == 0 ? 0 : base_[q.seq];  // a sequence started over needs nothing held
    const int64_t floor = graph::kv_window_floor(base, n_swa_);
    if (q.pos0 < floor)
      fail(where, "slot {}: a step at position {} rewinds past what its sliding-window layers hold (from {} on)", q.seq,
           q.pos0, floor);
    next[q.seq] = graph::next_kv_window_base(base, q.pos0, q.pos0 + q.n_tokens, n_swa_, rows_);
  }
  return next;
}

int kv_cache_node(const parallel::DeviceGraph& g, int node, const char* where) {
  const parallel::LocalNode& ln = g.nodes[node];
  const int src = g.dims.kv_layer_of(ln.layer);
  if (src == ln.layer) return node;
  for (int i = 0; i < node; ++i) {
    const parallel::LocalNode& x = g.nodes[i];
    if (x.op != parallel::LocalOp::Attention || x.layer != src) continue;
    if (x.kv_heads != ln.kv_heads || !g.dims.owns_kv(src))
      fail(where, "{} (layer {}) reads layer {}'s KV cache, which holds other heads", ln.label, ln.layer, src);
    return i;
  }
  fail(where, "{} (layer {}) reads layer {}'s KV cache, which this device does not hold", ln.label, ln.layer, src);
}

}  // namespace weft::device
