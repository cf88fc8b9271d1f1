// The row loops of every SIMD dot kernel, written once. A kernel family (per ISA, in its own
// file) gives passes over a fixed number of rows; these drive them over a matrix (rows_dot) or
// one row (vec_dot), and are instantiated in the family's file beside its kernels.
#pragma once

#include "kernels/quants.h"

#include <cstddef>
#include <cstdint>

namespace weft::kernels {

// Decode streams the weights from DRAM in runs of one row (~1 KiB), too short for the hardware
// prefetcher to ramp up on, so the row loops prefetch: each row's step fetches the same bytes of
// the row prefetch_ahead(R, stride) bytes on, which a later pass reads. Whole rows ahead, and at
// least kPrefetchBytes, so that a line is requested about one DRAM latency before it is read
// (~100 ns at ~40 GB/s per core); a pass of R rows alone (4 x 1.1 KiB) is too short for that.
constexpr size_t kPrefetchBytes = 8192;
inline size_t prefetch_ahead(int rows_per_pass, size_t stride) {
  if (stride == 0) return 0;  // vec_dot: one row
  const size_t rows = (kPrefetchBytes + stride - 1) / stride;
  return (rows > static_cast<size_t>(rows_per_pass) ? rows : static_cast<size_t>(rows_per_pass)) * stride;
}
// Every 64-byte line of the kBytes at p.
template <size_t kBytes>
inline void prefetch_lines(const void* p) {
  for (size_t off = 0; off < kBytes; off += 64) __builtin_prefetch(static_cast<const char*>(p) + off, 0, 3);
}

// Dots of R weight rows (stride bytes apart; R fixed per function) with one activation row of n
// values: out[0..R). The activation row is in the weight type's vec_dot_type format.
using DotRowsFn = void (*)(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out);

// Dot: kPass, the rows per full pass (a power of two; its rows share each activation load), and
// rows<R>, a DotRowsFn for R = kPass, kPass / 2, ..., 1. The rows left after the full passes go
// in passes of halving size; a pass computes each of its rows exactly as a pass of one would.
template <class Dot, int R = Dot::kPass>
void rows_dot(int64_t n, int64_t n_rows, const void* w, size_t stride, const void* act, float* out) {
  static_assert(R > 0 && (R & (R - 1)) == 0, "passes are powers of two");
  const auto* p = static_cast<const uint8_t*>(w);
  int64_t r = 0;
  for (; r + R <= n_rows; r += R) Dot::template rows<R>(n, p + r * stride, stride, act, out + r);
  if constexpr (R > 1) {
    if (r < n_rows) rows_dot<Dot, R / 2>(n, n_rows - r, p + r * stride, stride, act, out + r);
  }
}

// One row through the family's one-row pass.
template <class Dot>
float vec_dot(int64_t n, const void* w, const void* act) {
  float out;
  Dot::template rows<1>(n, static_cast<const uint8_t*>(w), 0, act, &out);
  return out;
}

// The scalar tables' rows_dot: one vec_dot per row.
template <VecDotFn kDot>
void rows_dot_each(int64_t n, int64_t n_rows, const void* w, size_t stride, const void* act, float* out) {
  const auto* p = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < n_rows; ++r) out[r] = kDot(n, p + r * stride, act);
}

}  // namespace weft::kernels
