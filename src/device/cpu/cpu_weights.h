// A CPU device's view of its weight slices. Matrices that every step streams are copied onto 2 MiB
// pages (on the device's NUMA node when it has one), placed by the device's own thread; with
// map_weights, whole tensors and row slices point straight into the GGUF mapping instead (zero copy,
// shared by every in-process device), as they also do once copies would leave under 1 GiB of memory.
// Column slices are always copied: their rows are not contiguous.
#pragma once

#include "core/huge_buffer.h"
#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "parallel/plan.h"

#include <memory>
#include <optional>
#include <vector>

namespace weft::device {

class WeightStore {
 public:
  // repack_mapped: with map_weights, matmul weights the kernels repack are still copied, as
  // panels (a worker's: its slices sit in memory once anyway, and every product reads them).
  // reserve_bytes: the memory copies must leave free (tests raise it to see the fallback).
  // pool: threads that copy and repack the weights at load (null: the calling thread alone).
  WeightStore(int numa_node, bool map_weights, bool repack_mapped = false, uint64_t reserve_bytes = uint64_t{1} << 30,
              ThreadPool* pool = nullptr)
      : numa_node_(numa_node),
        map_weights_(map_weights),
        repack_mapped_(repack_mapped),
        reserve_(reserve_bytes),
        pool_(pool) {}
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // How a matrix is read: rows looked up (the embedding: a copy would only duplicate it), or
  // streamed whole every step by row kernels, or by kernels::matmul, whose copy is repacked into
  // panels where the kernels have them (kernels::can_repack), or as a stack of experts by the
  // expert kernels: panels too where every expert is whole panels (kernels::can_repack_experts).
  enum class Use { Lookup, Stream, Matmul, Experts };
  // A matrix slice as the kernels read it.
  kernels::WeightMatrix matrix(const gguf::File& f, const parallel::WeightSlice& s, Use use);
  // A vector (norm weight, bias, sinks) as f32, sliced by s.range; of a matrix (experts' biases, a row
  // per expert), the slice's rows or columns of every row, row after row.
  std::vector<float> vector(const gguf::File& f, const parallel::WeightSlice& s);
  uint64_t copied_bytes() const { return copied_; }

 private:
  uint8_t* allocate(size_t n);
  // Use::Experts: the slice's part of each expert repacked straight from the file; nullopt where
  // the experts are not whole panels (or no copy fits).
  std::optional<kernels::WeightMatrix> expert_panels(const gguf::File& f, const parallel::WeightSlice& s);
  bool room_for_copy(size_t n);
  kernels::WeightMatrix repack_into(const kernels::WeightMatrix& m, uint8_t* dst) {
    return kernels::repack(m, dst, pool_);
  }
  kernels::WeightMatrix copy(const kernels::WeightMatrix& m, Use use);
  kernels::WeightMatrix runs_matrix(const gguf::File& f, const parallel::WeightSlice& s, Use use);
  struct Chunk {
    HugeBuffer memory;
    size_t used;
  };
  int numa_node_;
  bool map_weights_, repack_mapped_;
  uint64_t reserve_;
  ThreadPool* pool_;
  bool out_of_room_ = false;
  std::vector<Chunk> chunks_;
  uint64_t copied_ = 0;
};

}  // namespace weft::device
