// Small AVX helpers shared by the AVX2 and AVX-512 kernel files. They carry WEFT_TARGET_AVX2, a
// subset of every caller's target, which lets them inline anywhere.
#pragma once

#include "kernels/isa.h"

#include <immintrin.h>

namespace weft::kernels::avx2 {

WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Sum of the 8 lanes.
WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Largest of the 8 lanes.
WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane k of the result = sum of the 8 lanes of a[k] (eight horizontal sums at once: hadd tree).
WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE __m256 transpose_add8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  // u0 lane i < 4: a[i] lanes 0..3 summed; lane 4 + i: a[i] lanes 4..7 (u1: a[4 + i]).
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

}  // namespace weft::kernels::avx2
