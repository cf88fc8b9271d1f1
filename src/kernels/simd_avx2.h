// Small AVX helpers shared by the AVX2 kernel files (each compiled for AVX2 per function, so these
// carry only the "avx2" target: a subset of every caller's, which lets them inline anywhere).
#pragma once

#include <immintrin.h>

namespace weft::kernels::avx2 {

// Sum of the 8 lanes.
__attribute__((target("avx2"), always_inline)) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Largest of the 8 lanes.
__attribute__((target("avx2"), always_inline)) inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace weft::kernels::avx2
