#include "parallel/wire_sum.h"

#include "core/fp16.h"

#include <algorithm>
#include <cstring>

namespace weft::parallel {
namespace {

// Sum in blocks small enough for the accumulator to live in L1 while every rank's block streams.
constexpr size_t kSumBlock = 512;

// Value of x after a trip over the wire.
template <WireType W>
inline float wire_round(float x) {
  if constexpr (W == WireType::BF16)
    return bf16_to_f32(f32_to_bf16(x));
  else if constexpr (W == WireType::F16)
    return fp16_to_f32(f32_to_fp16(x));
  else
    return x;
}

// Each block is fully read before it is written, which lets srcs and dsts alias.
template <WireType W>
void sum_into(const float* const* srcs, int n_src, float* const* dsts, int n_dst, size_t len) {
  float acc[kSumBlock];
  for (size_t b = 0; b < len; b += kSumBlock) {
    const size_t m = std::min(kSumBlock, len - b);
    const float* s0 = srcs[0] + b;
    for (size_t i = 0; i < m; ++i) acc[i] = wire_round<W>(s0[i]);
    for (int k = 1; k < n_src; ++k) {
      const float* s = srcs[k] + b;
      for (size_t i = 0; i < m; ++i) acc[i] += wire_round<W>(s[i]);
    }
    for (int j = 0; j < n_dst; ++j) std::memcpy(dsts[j] + b, acc, m * sizeof(float));
  }
}

}  // namespace

void sum_into(WireType w, const float* const* srcs, int n_src, float* const* dsts, int n_dst, size_t len) {
  switch (w) {
    case WireType::F32: return sum_into<WireType::F32>(srcs, n_src, dsts, n_dst, len);
    case WireType::BF16: return sum_into<WireType::BF16>(srcs, n_src, dsts, n_dst, len);
    case WireType::F16: return sum_into<WireType::F16>(srcs, n_src, dsts, n_dst, len);
  }
}

}  // namespace weft::parallel
