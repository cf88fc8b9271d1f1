#include "device/cpu/cpu_weights.h"

#include "core/error.h"
#include "core/system_memory.h"
#include "kernels/moe.h"
#include "kernels/quants.h"

#include <fmt/format.h>
#include <numa.h>

#include <algorithm>
#include <cstring>

namespace weft::device {

using Kind = parallel::WeightSlice::Kind;

// Weights are streamed every token: 2 MiB pages keep TLB misses (two-level walks in a VM) off
// that stream (`scripts/bench_ab.sh "-t 2 --mmap" "-t 2"`: median +2% tg on the 500m q4_0).
// Slices are packed into 64 MiB chunks of address space, so small models touch (and back) only
// the pages they fill, not a 2 MiB page per tensor.
uint8_t* WeightStore::allocate(size_t n) {
  constexpr size_t kAlign = 64, kHuge = size_t{2} << 20, kChunk = size_t{64} << 20;
  n = (n + kAlign - 1) / kAlign * kAlign;
  if (chunks_.empty() || chunks_.back().memory.size() - chunks_.back().used < n) {
    HugeBuffer memory(std::max(kChunk, (n + kHuge - 1) / kHuge * kHuge), "cpu", "weights");
    if (numa_node_ >= 0 && numa_available() >= 0) numa_tonode_memory(memory.data(), memory.size(), numa_node_);
    chunks_.push_back({std::move(memory), 0});
  }
  Chunk& c = chunks_.back();
  uint8_t* p = c.memory.data() + c.used;
  c.used += n;
  return p;
}

// A copy must leave the machine room: past that, the rest of the weights stay in the file mapping
// (as with --mmap), so a model that only fits mapped still loads instead of being OOM-killed.
bool WeightStore::room_for_copy(size_t n) {
  if (out_of_room_) return false;
  const auto avail = available_memory_bytes();
  if (!avail || *avail >= n + reserve_) return true;
  out_of_room_ = true;
  fmt::print(stderr,
             "[cpu] note: {} MiB of memory left; the remaining weights are read from the file mapping (--mmap)\n",
             *avail >> 20);
  return false;
}

// m's rows (contiguous in the copy, whatever m.row_stride), or its panels.
kernels::WeightMatrix WeightStore::copy(const kernels::WeightMatrix& m, Use use) {
  if (use == Use::Matmul && kernels::can_repack(m)) {
    const size_t n = kernels::repacked_bytes(m);
    copied_ += n;
    return repack_into(m, allocate(n + 64));
  }
  const size_t n = row_bytes(m.type, m.cols);
  uint8_t* dst = allocate(n * m.rows + 64);
  // Rows spread over the pool: reading the mapping faults its pages in, which one thread does slowly.
  auto rows = [&](int64_t r0, int64_t r1) {
    if (n == m.row_stride)
      std::memcpy(dst + n * r0, m.data + n * r0, n * (r1 - r0));
    else
      for (int64_t r = r0; r < r1; ++r) std::memcpy(dst + n * r, m.data + m.row_stride * r, n);
  };
  if (pool_ && pool_->size() > 1)
    pool_->parallel_for(m.rows, 1, rows);
  else
    rows(0, m.rows);
  copied_ += n * m.rows;
  kernels::WeightMatrix out = m;
  out.data = dst;
  out.row_stride = n;
  return out;
}

namespace {

// The experts a slice takes of its tensor, whole, as one matrix of their rows over the file: a
// stacked tensor (experts) is `mats` matrices of `rows` rows, and the slice takes the same part of
// each of s.experts, which lie one after another (a plain matrix is a stack of one).
struct StackRows {
  kernels::WeightMatrix m;
  int64_t rows;  // per expert
  parallel::Range ex;
};
StackRows stack_rows(const gguf::File& f, const parallel::WeightSlice& s) {
  const auto& t = f.tensor(s.tensor);
  StackRows st;
  st.m.type = t.type;
  st.m.cols = t.shape[0];
  st.rows = t.shape.size() > 1 ? t.shape[1] : 1;
  const int64_t mats = t.n_elements() / (st.m.cols * st.rows);
  st.ex = s.experts.empty() ? parallel::Range{0, mats} : s.experts;
  WEFT_ASSERT(st.ex.begin >= 0 && st.ex.end <= mats && !st.ex.empty());
  st.m.row_stride = row_bytes(t.type, st.m.cols);
  st.m.data = t.data + st.m.row_stride * st.rows * st.ex.begin;
  st.m.rows = st.rows * st.ex.size();
  return st;
}

}  // namespace

std::optional<kernels::WeightMatrix> WeightStore::expert_panels(const gguf::File& f, const parallel::WeightSlice& s) {
  if (map_weights_ && !repack_mapped_ && numa_node_ < 0) return std::nullopt;  // --mmap: read in place
  const auto [stack, rows, ex] = stack_rows(f, s);
  const DType type = stack.type;
  const size_t stride = stack.row_stride;
  // Expert 0's part as a matrix over the file (rows stride apart); expert e's is e * rows rows on.
  kernels::WeightMatrix one = stack;
  one.rows = rows;
  if (s.kind == Kind::Rows) {
    one.data += stride * s.range.begin;
    one.rows = s.range.size();
  } else if (s.kind == Kind::Cols) {
    if (s.range.begin % block_size(type) || s.range.end % block_size(type)) return std::nullopt;
    one.data += row_bytes(type, s.range.begin);
    one.cols = s.range.size();
  }
  if (!kernels::can_repack_experts(one)) return std::nullopt;
  const size_t each = kernels::repacked_bytes(one), n = each * ex.size();
  if (!room_for_copy(n)) return std::nullopt;
  uint8_t* dst = allocate(n + 64);
  kernels::WeightMatrix src = one;
  for (int64_t e = 0; e < ex.size(); ++e, src.data += stride * rows) repack_into(src, dst + each * e);
  copied_ += n;
  f.release(stack.data, stride * stack.rows);
  return kernels::WeightMatrix{
      type, dst, one.rows * ex.size(), one.cols, row_bytes(type, one.cols), kernels::WeightLayout::Panels};
}

kernels::WeightMatrix WeightStore::matrix(const gguf::File& f, const parallel::WeightSlice& s, Use use) {
  if (s.repeats > 1 && !s.range.empty()) return runs_matrix(f, s, use);
  if (use == Use::Experts)
    if (auto panels = expert_panels(f, s)) return *panels;
  const auto& t = f.tensor(s.tensor);
  auto [m, rows, ex] = stack_rows(f, s);
  if (s.kind == Kind::Rows) {
    WEFT_ASSERT(s.range.begin >= 0 && s.range.end <= rows);
    if (ex.size() > 1 && s.range.size() != rows) {  // part of every expert: not contiguous, so copied
      const size_t n = m.row_stride * s.range.size();
      uint8_t* dst = allocate(n * ex.size() + 64);
      for (int64_t e = 0; e < ex.size(); ++e)
        std::memcpy(dst + n * e, m.data + m.row_stride * (rows * e + s.range.begin), n);
      copied_ += n * ex.size();
      m.data = dst;
      m.rows = s.range.size() * ex.size();
      return m;
    }
    m.data += m.row_stride * s.range.begin;
    m.rows = s.range.size() * ex.size();
  } else if (s.kind == Kind::Cols) {
    const int64_t blk = block_size(t.type);
    if (s.range.begin % blk || (s.range.end % blk && s.range.end != m.cols))
      fail("cpu", "column slice [{}, {}) of '{}' is not on {}-element blocks", s.range.begin, s.range.end, s.tensor,
           blk);
    kernels::WeightMatrix cols = m;  // the slice's columns of every row, rows still row_stride apart
    cols.data += row_bytes(t.type, s.range.begin);
    cols.cols = s.range.size();
    cols = copy(cols, use);
    f.release(m.data, m.row_stride * m.rows);  // other devices' columns fault back in if they still read them
    return cols;
  }
  const size_t n = m.row_stride * m.rows;
  const bool repack = use == Use::Matmul && repack_mapped_ && kernels::can_repack(m);
  if (numa_node_ >= 0 || (use != Use::Lookup && (!map_weights_ || repack) && room_for_copy(n))) {
    const kernels::WeightMatrix c = copy(m, use);
    f.release(m.data, n);
    return c;
  }
  return m;
}

// A slice of runs (Gated DeltaNet's value heads) of a matrix: the runs side by side, copied.
kernels::WeightMatrix WeightStore::runs_matrix(const gguf::File& f, const parallel::WeightSlice& s, Use use) {
  const auto& t = f.tensor(s.tensor);
  const auto [m, rows, ex] = stack_rows(f, s);
  const int64_t blk = block_size(t.type);
  const auto runs = s.runs();
  for (const auto& r : runs) {
    const int64_t dim = s.kind == Kind::Rows ? rows : m.cols;
    if (ex.size() != 1 || r.begin < 0 || r.end > dim || (s.kind == Kind::Cols && (r.begin % blk || r.end % blk)) ||
        (s.kind != Kind::Rows && s.kind != Kind::Cols))
      fail("cpu", "slice of '{}': run [{}, {}) is not whole rows or column blocks of one matrix", s.tensor, r.begin,
           r.end);
  }
  kernels::WeightMatrix dense = m;
  std::vector<uint8_t> bytes;
  if (s.kind == Kind::Rows) {
    for (const auto& r : runs)
      bytes.insert(bytes.end(), m.data + m.row_stride * r.begin, m.data + m.row_stride * r.end);
    dense.rows = s.taken();
  } else {
    dense.cols = s.taken();
    dense.row_stride = row_bytes(t.type, dense.cols);
    for (int64_t row = 0; row < m.rows; ++row)
      for (const auto& r : runs) {
        const uint8_t* p = m.data + m.row_stride * row + row_bytes(t.type, r.begin);
        bytes.insert(bytes.end(), p, p + row_bytes(t.type, r.size()));
      }
  }
  dense.data = bytes.data();
  const kernels::WeightMatrix c = copy(dense, use == Use::Lookup ? Use::Matmul : use);
  f.release(m.data, m.row_stride * m.rows);
  return c;
}

std::vector<float> WeightStore::vector(const gguf::File& f, const parallel::WeightSlice& s) {
  const auto& t = f.tensor(s.tensor);
  const int64_t n = t.n_elements();
  std::vector<float> all(n);
  if (n % block_size(t.type)) fail("cpu", "tensor '{}' length {} is not whole blocks", s.tensor, n);
  kernels::kernels_for(t.type).dequantize(t.data, all.data(), n);
  f.release(t.data, t.n_bytes);
  const int64_t cols = t.shape.empty() ? n : t.shape[0], rows = n / std::max<int64_t>(cols, 1);
  if (s.kind != Kind::Rows && s.kind != Kind::Cols) return all;
  std::vector<float> out;
  // A vector's elements, rows of a matrix (one expert's biases a row), or the columns of every row.
  const int64_t dim = s.kind == Kind::Cols ? cols : rows == 1 ? n : rows, width = rows == 1 ? 1 : cols;
  const auto runs = s.runs();
  for (const auto& r : runs)
    if (r.begin < 0 || r.end > dim) fail("cpu", "slice [{}, {}) of '{}' outside 0..{}", r.begin, r.end, s.tensor, dim);
  if (s.kind == Kind::Rows) {
    for (const auto& r : runs) out.insert(out.end(), all.begin() + r.begin * width, all.begin() + r.end * width);
    return out;
  }
  for (int64_t row = 0; row < rows; ++row)
    for (const auto& r : runs)
      out.insert(out.end(), all.begin() + row * cols + r.begin, all.begin() + row * cols + r.end);
  return out;
}

}  // namespace weft::device
