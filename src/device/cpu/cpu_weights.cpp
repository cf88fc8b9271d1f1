#include "device/cpu/cpu_weights.h"

#include "core/error.h"
#include "kernels/quants.h"

#include <numa.h>

#include <cstdlib>
#include <cstring>

namespace weft::device {

using Kind = parallel::WeightSlice::Kind;

WeightStore::~WeightStore() {
  for (const Block& b : blocks_) {
    if (b.numa) numa_free(b.p, b.n);
    else std::free(b.p);
  }
}

uint8_t* WeightStore::allocate(size_t n) {
  if (numa_node_ >= 0 && numa_available() >= 0) {
    void* p = numa_alloc_onnode(n, numa_node_);
    if (!p) fail("cpu", "cannot allocate {} bytes on NUMA node {}", n, numa_node_);
    blocks_.push_back({static_cast<uint8_t*>(p), n, true});
    return static_cast<uint8_t*>(p);
  }
  void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
  if (!p) fail("cpu", "cannot allocate {} bytes for weights", n);
  blocks_.push_back({static_cast<uint8_t*>(p), n, false});
  return static_cast<uint8_t*>(p);
}

kernels::WeightMatrix WeightStore::matrix(const gguf::File& f, const parallel::WeightSlice& s) {
  const auto& t = f.tensor(s.tensor);
  kernels::WeightMatrix m;
  m.type = t.type;
  m.cols = t.shape[0];
  m.rows = t.n_elements() / m.cols;
  m.row_stride = row_bytes(t.type, m.cols);
  m.data = t.data;
  if (s.kind == Kind::Rows) {
    WEFT_ASSERT(s.range.begin >= 0 && s.range.end <= m.rows);
    m.data += m.row_stride * s.range.begin;
    m.rows = s.range.size();
  } else if (s.kind == Kind::Cols) {
    const int64_t blk = block_size(t.type);
    if (s.range.begin % blk || (s.range.end % blk && s.range.end != m.cols))
      fail("cpu", "column slice [{}, {}) of '{}' is not on {}-element blocks", s.range.begin, s.range.end, s.tensor, blk);
    const size_t off = row_bytes(t.type, s.range.begin), n = row_bytes(t.type, s.range.size());
    uint8_t* dst = allocate(n * m.rows + 64);
    for (int64_t r = 0; r < m.rows; ++r) std::memcpy(dst + n * r, m.data + m.row_stride * r + off, n);
    copied_ += n * m.rows;
    m.data = dst;
    m.cols = s.range.size();
    m.row_stride = n;
    return m;
  }
  if (numa_node_ >= 0) {  // first-touch the slice on the device's own node
    const size_t n = m.row_stride * m.rows;
    uint8_t* dst = allocate(n + 64);
    std::memcpy(dst, m.data, n);
    copied_ += n;
    m.data = dst;
  }
  return m;
}

std::vector<float> WeightStore::vector(const gguf::File& f, const parallel::WeightSlice& s) {
  const auto& t = f.tensor(s.tensor);
  const int64_t n = t.n_elements();
  std::vector<float> all(n);
  if (n % block_size(t.type)) fail("cpu", "tensor '{}' length {} is not whole blocks", s.tensor, n);
  kernels::kernels_for(t.type).dequantize(t.data, all.data(), n);
  if (s.kind == Kind::Rows) {
    WEFT_ASSERT(s.range.begin >= 0 && s.range.end <= n);
    return {all.begin() + s.range.begin, all.begin() + s.range.end};
  }
  return all;
}

}  // namespace weft::device
