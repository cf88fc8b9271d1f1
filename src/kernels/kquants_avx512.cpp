// AVX-512 (F/BW/VL + VNNI) K-quant kernels: Q4_K/Q5_K/Q6_K . Q8_K dot products and f32 -> Q8_K.
// Only these functions carry the target attribute; quants.cpp offers this table only where
// isa_supported(Isa::Avx512). Never AMX.
//
// Same scheme as the AVX2 file on 64-byte vectors: vpmaddubsw (unsigned level x signed q8, pairs
// to int16) then VNNI vpdpwssd, which applies the int16 sub-block scale, widens and accumulates
// in one instruction. (vpdpbusd would sum four products straight to int32, but the per-sub-block
// scale then needs a vpmulld, two more uops than the vpmaddubsw + vpdpwssd pair.)
// A 64-byte vector holds whole sub-blocks, so each vector's int16 scales come from one vpermw.
#include "kernels/kquants_impl.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*() (GCC PR105593,
// fixed in 12.3); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>
#include <type_traits>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

namespace weft::kernels::kquants {

namespace {

// The `r` loops over a group's rows carry `#pragma GCC unroll`: unrolled, each row's state lives
// in registers; left as loops (GCC does not unroll the setup ones by itself), it goes through the
// stack and a 2-row pass ran slower than two 1-row passes.

// Rows per rows_dot pass: 32 vector registers hold four rows' state with the shared q8 vectors.
constexpr int kGroupRows = 4;

using avx2::load256;
WEFT_TARGET_AVX512 inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// [lo, hi] as one 512-bit vector.
WEFT_TARGET_AVX512 inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// vpermw index: int16 lanes 0..15 take lane a, lanes 16..31 lane b.
WEFT_TARGET_AVX512 inline __m512i halves_index(int a, int b) {
  return join(_mm256_set1_epi16(static_cast<short>(a)), _mm256_set1_epi16(static_cast<short>(b)));
}

// vpermw index: int16 lane L takes lane base + L / 8 (four scales of 16 values each).
WEFT_TARGET_AVX512 inline __m512i quarters_index(int base) {
  return join(
      _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(base + 1)), _mm_set1_epi16(static_cast<short>(base))),
      _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(base + 3)), _mm_set1_epi16(static_cast<short>(base + 2))));
}

WEFT_TARGET_AVX512 inline __m512i widen(__m256i v) { return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0); }

// Q4_K (kHigh = false) and Q5_K (kHigh = true). Vector k (k = 0, 1) covers qs[64k .. 64k + 63]:
// its low nibbles are sub-blocks 4k (bytes 0..31) and 4k + 2 (bytes 32..63), its high nibbles
// sub-blocks 4k + 1 and 4k + 3; the q8 vectors are assembled in that same order.
template <int R, bool kHigh>
WEFT_TARGET_AVX512 void dot_rows_q45_K(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  const int64_t nb = n / kQK;
  const auto* y = static_cast<const BlockQ8K*>(act);
  const size_t ahead = prefetch_ahead(R, w_stride);  // rows_dot.h
  using Block = std::conditional_t<kHigh, BlockQ5K, BlockQ4K>;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const __m512i sel[2][2] = {{halves_index(0, 2), halves_index(1, 3)}, {halves_index(4, 6), halves_index(5, 7)}};
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const Block* x[R];
    __m512i sc[R], sumi[R], qh[R], min_term[R];
    const __m256i bsums = load256(y[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const Block*>(w + r * w_stride) + i;
      prefetch_lines<sizeof(Block)>(reinterpret_cast<const uint8_t*>(x[r]) + ahead);
      uint64_t sc8, m8;
      unpack_scales_mins_x8(x[r]->scales, &sc8, &m8);
      sc[r] = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
      // m[j] * (bsums[2j] + bsums[2j + 1]); scaled by dmin, not d, so kept apart from sumi.
      const __m128i mm = _mm_cvtsi64_si128(static_cast<long long>(m8));
      min_term[r] = widen(_mm256_madd_epi16(bsums, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mm, mm))));
      sumi[r] = _mm512_setzero_si512();
      if constexpr (kHigh) {
        const __m256i h = load256(x[r]->qh);
        qh[r] = join(h, _mm256_srli_epi16(h, 2));  // high half: chunk 2k + 1 uses bits 2 higher
      }
    }
    for (int k = 0; k < 2; ++k) {
      const int8_t* q8 = y[i].qs + 128 * k;
      const __m512i q8_lo = join(load256(q8), load256(q8 + 64));
      const __m512i q8_hi = join(load256(q8 + 32), load256(q8 + 96));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i q = load512(x[r]->qs + 64 * k);
        __m512i lo = _mm512_and_si512(q, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        if constexpr (kHigh) {
          lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh[r], _mm512_set1_epi8(static_cast<char>(1 << (4 * k)))),
                                    lo, bit4);
          hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh[r], _mm512_set1_epi8(static_cast<char>(2 << (4 * k)))),
                                    hi, bit4);
        }
        sumi[r] =
            _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(lo, q8_lo), _mm512_permutexvar_epi16(sel[k][0], sc[r]));
        sumi[r] =
            _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(hi, q8_hi), _mm512_permutexvar_epi16(sel[k][1], sc[r]));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float d = y[i].d * _cvtsh_ss(x[r]->d), dmin = y[i].d * _cvtsh_ss(x[r]->dmin);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_set1_ps(dmin), _mm512_cvtepi32_ps(min_term[r]), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// Q6_K. Half h: the 64 ql bytes are parts 0 (low nibbles of bytes 0..31), 1 (low, 32..63),
// 2 (high, 0..31), 3 (high, 32..63); joining qh with qh >> 2 lines the top bits of parts 0/1 and
// 2/3 up at the same positions. The q8 values of parts 0,1 and 2,3 are contiguous.
template <int R>
WEFT_TARGET_AVX512 void dot_rows_q6_K(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  const int64_t nb = n / kQK;
  const auto* y = static_cast<const BlockQ8K*>(act);
  const size_t ahead = prefetch_ahead(R, w_stride);  // rows_dot.h
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i sel[2][2] = {{quarters_index(0), quarters_index(4)}, {quarters_index(8), quarters_index(12)}};
  __m512 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6K* x[R];
    __m512i sc[R], sumi[R];
    const __m256i bsums = load256(y[i].bsums);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      x[r] = reinterpret_cast<const BlockQ6K*>(w + r * w_stride) + i;
      prefetch_lines<sizeof(BlockQ6K)>(reinterpret_cast<const uint8_t*>(x[r]) + ahead);
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r]->scales)));
      sc[r] = widen(sc16);
      // -32 * sum_j sc[j] * bsums[j]: the level offset, applied once per block.
      sumi[r] = widen(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bsums, sc16)), 5));
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i q8_lo = load512(y[i].qs + 128 * h);
      const __m512i q8_hi = load512(y[i].qs + 128 * h + 64);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i ql = load512(x[r]->ql + 64 * h);
        const __m256i qh256 = load256(x[r]->qh + 32 * h);
        const __m512i qh = join(qh256, _mm256_srli_epi16(qh256, 2));
        const __m512i lo =
            _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45));
        const __m512i hi =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(qh, bits45));
        sumi[r] =
            _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(lo, q8_lo), _mm512_permutexvar_epi16(sel[h][0], sc[r]));
        sumi[r] =
            _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(hi, q8_hi), _mm512_permutexvar_epi16(sel[h][1], sc[r]));
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float d = y[i].d * _cvtsh_ss(x[r]->d);
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// Same arithmetic as quantize_row_q8_K_ref, so the output is bit-identical to it.
WEFT_TARGET_AVX512 void quantize_row_q8_K_avx512(const float* src, void* dst, int64_t n) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  auto* y = static_cast<BlockQ8K*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    __m512 vmax = _mm512_setzero_ps();
    for (int k = 0; k < kQK; k += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8K));
      continue;
    }
    const float iscale = 127.0f / amax;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int k = 0; k < kQK; k += 16) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + k)));
      q = _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
      const __m128i q8 = _mm512_cvtepi32_epi8(q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + k), q8);
      // Sum of the 16: vpsadbw adds 8 bytes of q + 128 at a time, so each half-sum carries 8 * 128.
      const __m128i s = _mm_sad_epu8(_mm_xor_si128(q8, _mm_set1_epi8(static_cast<char>(0x80))), _mm_setzero_si128());
      y[i].bsums[k / 16] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s))) - 2048);
    }
    y[i].d = 1.0f / iscale;
  }
}

// This file's kernels, as simd_table_of takes them.
struct Avx512Kernels {
  static constexpr Isa kIsa = Isa::Avx512;
  static constexpr int kGroupRows = kquants::kGroupRows;
  template <int R, bool kHigh>
  static constexpr DotRowsFn dot_q45 = dot_rows_q45_K<R, kHigh>;
  template <int R>
  static constexpr DotRowsFn dot_q6 = dot_rows_q6_K<R>;
  template <int R>
  static constexpr DotRowsFn dot_q2 = dot_rows_q23_K_avx2<R, false>;  // see kquants_impl.h
  template <int R>
  static constexpr DotRowsFn dot_q3 = dot_rows_q23_K_avx2<R, true>;
  static constexpr QuantizeFn quantize_q8 = quantize_row_q8_K_avx512;
};

}  // namespace

template <>
TypeTable table<Isa::Avx512>() {
  return simd_table_of<Avx512Kernels>();
}

}  // namespace weft::kernels::kquants
