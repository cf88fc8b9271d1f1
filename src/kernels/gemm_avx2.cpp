// AVX2 micro-kernel of the prompt GEMM (gemm_q8.h), for CPUs without AVX-512 VNNI: the same
// panels, each 64-byte group as two ymm (rows 0..7, 8..15). vpmaddubsw multiplies the u8
// levels by the broadcast int8 values and adds pairs to int16; two groups' int16 sums are
// added before vpmaddwd widens them to int32, which is exact while levels stay <= 63
// (2 groups x 2 x 63 x 127 < 32767). Q8_0's levels (q + 128) would saturate vpmaddubsw, so it
// keeps rows_dot here. Packing is the scalar pack_panel.
#include "kernels/gemm_q8.h"

#include "kernels/isa.h"

#include <immintrin.h>

#include <cstring>

namespace weft::kernels::gemm {
namespace {

template <int kScales, bool kMin, bool kCorr, int T>
WEFT_TARGET_AVX2 void tile(const uint8_t* panel, size_t block_bytes, int64_t nb, const ActBlock* act,
                           int64_t act_stride, float* y, int64_t ldy, int n_rows, size_t) {
  constexpr int kPerScale = kGroups / kScales;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, panel += block_bytes, act += act_stride) {
    const auto* sc = reinterpret_cast<const float*>(panel + kGroups * 64);
    for (int s = 0; s < kScales; ++s) {
      __m256i sumi[T][2];
      for (int t = 0; t < T; ++t) {
        const __m256i c = kCorr ? _mm256_set1_epi32(s == 0 ? act[t].c0 : act[t].c1) : _mm256_setzero_si256();
        sumi[t][0] = sumi[t][1] = c;
      }
#pragma GCC unroll 4
      for (int g = s * kPerScale; g < (s + 1) * kPerScale; g += 2) {
        const uint8_t* pg = panel + 64 * g;
        const __m256i w00 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg));
        const __m256i w01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + 32));
        const __m256i w10 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + 64));
        const __m256i w11 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pg + 96));
#pragma GCC unroll 2
        for (int t = 0; t < T; ++t) {
          const __m256i a0 = _mm256_set1_epi32(load_i32(act[t].q + 4 * g));
          const __m256i a1 = _mm256_set1_epi32(load_i32(act[t].q + 4 * g + 4));
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(w00, a0), _mm256_maddubs_epi16(w10, a1));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(w01, a0), _mm256_maddubs_epi16(w11, a1));
          sumi[t][0] = _mm256_add_epi32(sumi[t][0], _mm256_madd_epi16(p0, ones));
          sumi[t][1] = _mm256_add_epi32(sumi[t][1], _mm256_madd_epi16(p1, ones));
        }
      }
      const __m256 sc0 = _mm256_loadu_ps(sc + 16 * s), sc1 = _mm256_loadu_ps(sc + 16 * s + 8);
      for (int t = 0; t < T; ++t) {
        const __m256 d = _mm256_set1_ps(act[t].d);
        acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t][0]), _mm256_mul_ps(sc0, d), acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t][1]), _mm256_mul_ps(sc1, d), acc[t][1]);
      }
    }
    if constexpr (kMin) {
      const __m256 mn0 = _mm256_loadu_ps(sc + 16 * kScales), mn1 = _mm256_loadu_ps(sc + 16 * kScales + 8);
      for (int t = 0; t < T; ++t) {
        const __m256 s = _mm256_set1_ps(act[t].s);
        acc[t][0] = _mm256_fmadd_ps(mn0, s, acc[t][0]);
        acc[t][1] = _mm256_fmadd_ps(mn1, s, acc[t][1]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(32) float out[kPanelRows];
    _mm256_store_ps(out, acc[t][0]);
    _mm256_store_ps(out + 8, acc[t][1]);
    std::memcpy(y + t * ldy, out, sizeof(float) * n_rows);
  }
}

struct Avx2Gemm {
  // 16 ymm registers: 2 tokens x (2 int32 + 2 float accumulators) plus four weight vectors.
  static constexpr int kTokens = 2;
  static constexpr bool kRepacked = false;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<kScales, kMin, kCorr, T>;
  static void pack(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t) {
    pack_panel(w, r0, n_rows, panel);
  }
};

}  // namespace

template <>
GemmFn find<Isa::Avx2>(DType t) {
  return has_panel(t) && t != DType::Q8_0 ? gemm_driver<Avx2Gemm> : nullptr;
}

}  // namespace weft::kernels::gemm
