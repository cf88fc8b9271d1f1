// IQ4_NL / IQ4_XS / MXFP4 dots on AVX2 (also the AVX-512 level's: the grid lookup is one vpshufb
// either way, and these passes stream the weights near the memory's rate). Each 32-value run: nibbles
// split into one ymm (values 0..15 low lane, 16..31 high), vpshufb maps them to grid levels, and
// signed levels times signed activations go through vpmaddubsw as |level| x (activation with the
// level's sign; a level 0 of MXFP4 zeroes both): |pair sums| <= 2 x 127 x 127 fit int16. IQ4_NL and
// MXFP4 differ only in their grid and their blocks' scale (simd_scale).
#include "kernels/iquants.h"

#include "kernels/iquants_impl.h"
#include "kernels/kquants_impl.h"
#include "kernels/quants_legacy.h"
#include "kernels/rows_dot.h"
#include "kernels/simd_avx2.h"

#include <immintrin.h>

namespace weft::kernels::iquants {
namespace {

using avx2::hsum;
using avx2::load128;
using avx2::load256;

// The grid levels of a 32-value run of paired nibbles at qs.
WEFT_TARGET_AVX2 inline __m256i grid_levels(const uint8_t* qs, __m256i grid) {
  const __m128i q = load128(qs);
  const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(grid, nib);
}

// Pair sums (int16) of levels times activations.
WEFT_TARGET_AVX2 inline __m256i level_products(__m256i levels, __m256i a) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(levels, levels), _mm256_sign_epi8(a, levels));
}

WEFT_TARGET_AVX2 inline __m256i grid_vector(const int8_t* grid) { return _mm256_broadcastsi128_si256(load128(grid)); }

// A 32-value block's scale as a float: IQ4_NL's fp16 by F16C (block_scale's scalar conversion takes
// branches), MXFP4's E8M0 by its bits (e8m0_half: a compare, shifts and a select in registers).
WEFT_TARGET_AVX2 inline float simd_scale(const BlockIQ4NL& b) { return _cvtsh_ss(b.d); }
WEFT_TARGET_AVX2 inline float simd_scale(const BlockMXFP4& b) { return e8m0_half(b.e); }

// IQ4_NL, MXFP4: one float step per block.
template <class Block, int R>
WEFT_TARGET_AVX2 void dot_rows_grid32(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const auto* y = static_cast<const legacy::BlockQ8_0*>(act);
  const Block* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const Block*>(w + r * stride);
  const __m256i grid = grid_vector(kLevels<kBlockType<Block>>), ones = _mm256_set1_epi16(1);
  const size_t ahead = prefetch_ahead(R, stride);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK4NL; ++i) {
    const __m256i a = load256(y[i].qs);
    const float da = _cvtsh_ss(y[i].d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (ahead && i % 4 == 0) prefetch_lines<4 * sizeof(Block)>(reinterpret_cast<const uint8_t*>(x[r] + i) + ahead);
      const __m256i p = _mm256_madd_epi16(level_products(grid_levels(x[r][i].qs, grid), a), ones);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(da * simd_scale(x[r][i])), _mm256_cvtepi32_ps(p), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// A super-block's int sum: each sub-block's pair sums times its scale (ls - 32) by one vpmaddwd
// (|sum| <= 8 x 2 x 32 x 2 x 127 x 127 per lane: exact in int32), then one float step per block.
template <int R>
WEFT_TARGET_AVX2 void dot_rows_iq4_xs(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const auto* y = static_cast<const kquants::BlockQ8K*>(act);
  const BlockIQ4XS* x[R];
  for (int r = 0; r < R; ++r) x[r] = reinterpret_cast<const BlockIQ4XS*>(w + r * stride);
  const __m256i grid = grid_vector(kGrid);
  const size_t ahead = prefetch_ahead(R, stride);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKXS; ++i) {
    __m256i sumi[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      if (ahead) prefetch_lines<sizeof(BlockIQ4XS)>(reinterpret_cast<const uint8_t*>(x[r] + i) + ahead);
      sumi[r] = _mm256_setzero_si256();
    }
    for (int ib = 0; ib < kQKXS / 32; ++ib) {
      const __m256i a = load256(y[i].qs + 32 * ib);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i scale = _mm256_set1_epi16(static_cast<int16_t>(iq4xs_scale(x[r][i], ib) - 32));
        const __m256i p = level_products(grid_levels(x[r][i].qs + 16 * ib, grid), a);
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, scale));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * _cvtsh_ss(x[r][i].d)), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

template <class Block>
struct Grid32Dot {
  static constexpr int kPass = 4;
  template <int R>
  static constexpr DotRowsFn rows = dot_rows_grid32<Block, R>;
};
struct XsDot {
  static constexpr int kPass = 4;
  template <int R>
  static constexpr DotRowsFn rows = dot_rows_iq4_xs<R>;
};

template <Isa I>
TypeTable simd_table() {
  using NlDot = Grid32Dot<BlockIQ4NL>;
  using MxDot = Grid32Dot<BlockMXFP4>;
  static const std::array<TypeKernels, 3> kTable = make_table<I>(
      {vec_dot<NlDot>, rows_dot<NlDot>}, {vec_dot<XsDot>, rows_dot<XsDot>}, {vec_dot<MxDot>, rows_dot<MxDot>});
  return kTable;
}

}  // namespace

template <>
TypeTable table<Isa::Avx2>() {
  return simd_table<Isa::Avx2>();
}
template <>
TypeTable table<Isa::Avx512>() {
  return simd_table<Isa::Avx512>();
}

}  // namespace weft::kernels::iquants
