// A CPU device's view of its weight slices. Whole tensors and row slices point straight into the
// GGUF mapping (zero copy, shared by every in-process device); column slices and devices bound to a
// NUMA node get their own copy, placed on that node.
#pragma once

#include "gguf/gguf_reader.h"
#include "kernels/matmul.h"
#include "parallel/plan.h"

#include <memory>
#include <vector>

namespace weft::device {

class WeightStore {
 public:
  explicit WeightStore(int numa_node) : numa_node_(numa_node) {}
  ~WeightStore();
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // A matrix slice as the matmul kernels read it.
  kernels::WeightMatrix matrix(const gguf::File& f, const parallel::WeightSlice& s);
  // A vector (norm weight, bias) as f32, sliced by s.range for Rows slices.
  std::vector<float> vector(const gguf::File& f, const parallel::WeightSlice& s);
  uint64_t copied_bytes() const { return copied_; }

 private:
  uint8_t* allocate(size_t n);
  struct Block {
    uint8_t* p;
    size_t n;
    bool numa;
  };
  int numa_node_;
  std::vector<Block> blocks_;
  uint64_t copied_ = 0;
};

}  // namespace weft::device
