// AVX2 + FMA + F16C K-quant kernels: Q2_K .. Q6_K . Q8_K dot products and f32 -> Q8_K.
// Only these functions carry the target attribute, so the binary still runs on older CPUs
// (quants.cpp offers this table only where isa_supported(Isa::Avx2)).
//
// Dot products: vpmaddubsw multiplies the unsigned weight levels (<= 63) by the signed q8 values
// (|q8| <= 127) and adds pairs into int16 without saturating (2 * 63 * 127 < 32767), vpmaddwd
// applies the sub-block scale and widens to int32; the min / -32 offset terms come from bsums.
// Each block's int32 sums become float once, times the block's scale.
#include "kernels/kquants_impl.h"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

namespace weft::kernels::kquants {

namespace {

using avx2::hmax;
using avx2::hsum;
using avx2::load256;

// The `r` loops over a group's rows carry `#pragma GCC unroll`: unrolled, each row's state lives
// in registers; left as loops (GCC does not unroll the setup ones by itself), it goes through the
// stack and a 2-row pass ran slower than two 1-row passes.

// Rows per rows_dot pass: AVX2 has 16 vector registers, which two rows' state fits.
constexpr int kGroupRows = 2;

// vpshufb control that copies int16 lane `k` (of each 128-bit half) to every lane.
WEFT_TARGET_AVX2 inline __m256i word_broadcast_mask(int k) {
  return _mm256_set1_epi16(static_cast<short>(0x0100 + 0x0202 * k));
}

// For 16-value sub-blocks (Q2_K, Q3_K, Q6_K), with a half's 8 scales as int16 in both 128-bit
// lanes: vpshufb controls that give part p (32 values) scale 2p in the low lane (its values
// 0..15) and 2p + 1 in the high one.
WEFT_TARGET_AVX2 inline void part_scale_masks(__m256i sel[4]) {
  for (int p = 0; p < 4; ++p)
    sel[p] = _mm256_set_m128i(_mm256_castsi256_si128(word_broadcast_mask(2 * p + 1)),
                              _mm256_castsi256_si128(word_broadcast_mask(2 * p)));
}

// Per-row state of a Q4_K/Q5_K block: its 8 scales as int16 in both 128-bit halves, and the min
// term m[j] * (bsums[2j] + bsums[2j + 1]) as 8 int32.
struct ScaleMin {
  __m256i sc16;
  __m256i min_term;
};

WEFT_TARGET_AVX2 inline ScaleMin scale_min_terms(const uint8_t* scales, __m256i bsums) {
  uint64_t sc, m;
  unpack_scales_mins_x8(scales, &sc, &m);
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(m));
  const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // m0 m0 m1 m1 .. m7 m7
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc)))),
          _mm256_madd_epi16(bsums, m16)};
}

// Q4_K (kHigh = false) and Q5_K (kHigh = true) share everything but the fifth bit.
template <int R, bool kHigh>
WEFT_TARGET_AVX2 void dot_rows_q45_K(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  const int64_t nb = n / kQK;
  const auto* y = static_cast<const BlockQ8K*>(act);
  const size_t ahead = prefetch_ahead(R, w_stride);
  using Block = std::conditional_t<kHigh, BlockQ5K, BlockQ4K>;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const Block* x[R];
    ScaleMin sm[R];
    __m256i sumi[R], qh[R];
    const __m256i bsums = load256(y[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const Block*>(w + r * w_stride) + i;
      prefetch_lines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(x[r]) + ahead);
      sm[r] = scale_min_terms(x[r]->scales, bsums);
      sumi[r] = _mm256_setzero_si256();
      if constexpr (kHigh) qh[r] = load256(x[r]->qh);
    }
    // Chunk c: 32 bytes of qs = values 64c..64c+31 (low nibbles, sub-block 2c) and
    // 64c+32..64c+63 (high nibbles, sub-block 2c + 1).
    for (int c = 0; c < 4; ++c) {
      const __m256i q8_lo = load256(y[i].qs + 64 * c);
      const __m256i q8_hi = load256(y[i].qs + 64 * c + 32);
      const __m256i sel_lo = word_broadcast_mask(2 * c), sel_hi = word_broadcast_mask(2 * c + 1);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i q = load256(x[r]->qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
        if constexpr (kHigh) {
          // Bit 2c (2c + 1) of each qh byte, moved to bit 4. The 16-bit shifts carry bits across
          // bytes only into positions the masks drop.
          lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh[r], 2 * c), 4), bit4));
          hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh[r], 2 * c + 1), 4), bit4));
        }
        const __m256i p_lo =
            _mm256_madd_epi16(_mm256_maddubs_epi16(lo, q8_lo), _mm256_shuffle_epi8(sm[r].sc16, sel_lo));
        const __m256i p_hi =
            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, q8_hi), _mm256_shuffle_epi8(sm[r].sc16, sel_hi));
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(p_lo, p_hi));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float d = y[i].d * _cvtsh_ss(x[r]->d), dmin = y[i].d * _cvtsh_ss(x[r]->dmin);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
      acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(sm[r].min_term), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

template <int R>
WEFT_TARGET_AVX2 void dot_rows_q6_K(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  const int64_t nb = n / kQK;
  const auto* y = static_cast<const BlockQ8K*>(act);
  const size_t ahead = prefetch_ahead(R, w_stride);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  __m256i sel[4];
  part_scale_masks(sel);
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6K* x[R];
    __m256i sc16[R], sumi[R];
    const __m256i bsums = load256(y[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const BlockQ6K*>(w + r * w_stride) + i;
      prefetch_lines<sizeof(BlockQ6K)>(reinterpret_cast<const uint8_t*>(x[r]) + ahead);
      sc16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r]->scales)));
      // -32 * sum_j sc[j] * bsums[j]: the level offset, applied once per block.
      sumi[r] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bsums, sc16[r])), 5);
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* q8 = y[i].qs + 128 * h;
      const __m256i q8_0 = load256(q8), q8_1 = load256(q8 + 32), q8_2 = load256(q8 + 64), q8_3 = load256(q8 + 96);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i ql0 = load256(x[r]->ql + 64 * h), ql1 = load256(x[r]->ql + 64 * h + 32);
        const __m256i qh = load256(x[r]->qh + 32 * h);
        // Part p takes ql's low (p < 2) or high nibble and bits 2p..2p+1 of qh as bits 4..5.
        const __m256i q0 =
            _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
        const __m256i q1 =
            _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
        const __m256i q2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, bits45));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
        // This half's 8 scales in both 128-bit lanes, then one per (part, 16 values).
        const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16[r], sc16[r], 0x00)
                                    : _mm256_permute2x128_si256(sc16[r], sc16[r], 0x11);
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, q8_0), _mm256_shuffle_epi8(sc_h, sel[0]));
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, q8_1), _mm256_shuffle_epi8(sc_h, sel[1]));
        const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(q2, q8_2), _mm256_shuffle_epi8(sc_h, sel[2]));
        const __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(q3, q8_3), _mm256_shuffle_epi8(sc_h, sel[3]));
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float d = y[i].d * _cvtsh_ss(x[r]->d);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// Same arithmetic as quantize_row_q8_K_ref (amax, 127 / amax, round to nearest even), so the
// output is bit-identical to it.
WEFT_TARGET_AVX2 void quantize_row_q8_K_avx2(const float* src, void* dst, int64_t n) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  auto* y = static_cast<BlockQ8K*>(dst);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lane_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < kQK; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
    const float amax = hmax(vmax);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8K));
      continue;
    }
    const float iscale = 127.0f / amax;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int k = 0; k < kQK; k += 32) {
      const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k)));
      const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k + 8)));
      const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k + 16)));
      const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k + 24)));
      // The packs work per 128-bit half; the permute puts the 4-byte groups back in order.
      __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
      q = _mm256_permutevar8x32_epi32(q, lane_order);
      q = _mm256_max_epi8(q, _mm256_set1_epi8(-127));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + k), q);
      // Sums of 16: vpsadbw adds 8 bytes of q + 128 at a time, so each half-sum carries 8 * 128.
      alignas(32) uint64_t s[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(s),
                         _mm256_sad_epu8(_mm256_xor_si256(q, flip), _mm256_setzero_si256()));
      y[i].bsums[k / 16] = static_cast<int16_t>(static_cast<int>(s[0] + s[1]) - 2048);
      y[i].bsums[k / 16 + 1] = static_cast<int16_t>(static_cast<int>(s[2] + s[3]) - 2048);
    }
    y[i].d = 1.0f / iscale;
  }
}

// This file's kernels, as simd_table_of takes them.
struct Avx2Kernels {
  static constexpr Isa kIsa = Isa::Avx2;
  static constexpr int kGroupRows = kquants::kGroupRows;
  template <int R, bool kHigh>
  static constexpr DotRowsFn dot_q45 = dot_rows_q45_K<R, kHigh>;
  template <int R>
  static constexpr DotRowsFn dot_q6 = dot_rows_q6_K<R>;
  template <int R>
  static constexpr DotRowsFn dot_q2 = dot_rows_q23_K_avx2<R, false>;
  template <int R>
  static constexpr DotRowsFn dot_q3 = dot_rows_q23_K_avx2<R, true>;
  static constexpr QuantizeFn quantize_q8 = quantize_row_q8_K_avx2;
};

}  // namespace

// Q2_K (kQ3 = false) and Q3_K (kQ3 = true): 16 sub-blocks of 16 values, so as Q6_K each vpmaddwd
// takes one scale per 128-bit half. The 2-bit levels of values 128h + 32p .. + 31 are bits
// 2p..2p+1 of the 32 bytes qs[32h ..]; Q3_K adds bit 4h + p of hmask as bit 2. The offsets (Q2_K's
// min, Q3_K's -4) come from bsums once per block.
template <int R, bool kQ3>
WEFT_TARGET_AVX2 void dot_rows_q23_K_avx2(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  const int64_t nb = n / kQK;
  const auto* y = static_cast<const BlockQ8K*>(act);
  const size_t ahead = prefetch_ahead(R, w_stride);
  using Block = std::conditional_t<kQ3, BlockQ3K, BlockQ2K>;
  const __m256i low2 = _mm256_set1_epi8(3);
  const __m256i bit0 = _mm256_set1_epi8(1);
  __m256i sel[4];
  part_scale_masks(sel);
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const Block* x[R];
    __m256i sc16[R], sumi[R], min_term[R], hm[R];
    const __m256i bsums = load256(y[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const Block*>(w + r * w_stride) + i;
      prefetch_lines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(x[r]) + ahead);
      if constexpr (kQ3) {
        alignas(16) int8_t sc[16];
        unpack_q3_scales(x[r]->scales, sc);
        sc16[r] = _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sc)));
        // -4 * sum_j sc[j] * bsums[j]: the level offset, applied once per block.
        sumi[r] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bsums, sc16[r])), 2);
        hm[r] = load256(x[r]->hmask);
      } else {
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r]->scales));
        sc16[r] = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(0x0f)));
        min_term[r] =
            _mm256_madd_epi16(bsums, _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f))));
        sumi[r] = _mm256_setzero_si256();
      }
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* q8 = y[i].qs + 128 * h;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i qs = load256(x[r]->qs + 32 * h);
        // This half's 8 scales in both 128-bit lanes, then one per (part, 16 values).
        const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16[r], sc16[r], 0x00)
                                    : _mm256_permute2x128_si256(sc16[r], sc16[r], 0x11);
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * p), low2);
          if constexpr (kQ3)  // bit 4h + p of hmask to bit 2 (what the 16-bit shift carries in, the mask drops)
            q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm[r], 4 * h + p), bit0), 2));
          const __m256i prod =
              _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(q8 + 32 * p)), _mm256_shuffle_epi8(sc_h, sel[p]));
          sumi[r] = _mm256_add_epi32(sumi[r], prod);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * _cvtsh_ss(x[r]->d)), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
      if constexpr (!kQ3)
        acc[r] =
            _mm256_fnmadd_ps(_mm256_set1_ps(y[i].d * _cvtsh_ss(x[r]->dmin)), _mm256_cvtepi32_ps(min_term[r]), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

template void dot_rows_q23_K_avx2<1, false>(int64_t, const uint8_t*, size_t, const void*, float*);
template void dot_rows_q23_K_avx2<2, false>(int64_t, const uint8_t*, size_t, const void*, float*);
template void dot_rows_q23_K_avx2<4, false>(int64_t, const uint8_t*, size_t, const void*, float*);
template void dot_rows_q23_K_avx2<1, true>(int64_t, const uint8_t*, size_t, const void*, float*);
template void dot_rows_q23_K_avx2<2, true>(int64_t, const uint8_t*, size_t, const void*, float*);
template void dot_rows_q23_K_avx2<4, true>(int64_t, const uint8_t*, size_t, const void*, float*);

template <>
TypeTable table<Isa::Avx2>() {
  return simd_table_of<Avx2Kernels>();
}

}  // namespace weft::kernels::kquants
