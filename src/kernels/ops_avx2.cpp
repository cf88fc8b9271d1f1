// AVX2 + FMA table of the float ops (ops_simd.h over 8 lanes). Only this file's functions are
// compiled for AVX2, so the binary still runs on CPUs without it (ops.cpp picks the table at run time).
#include <immintrin.h>

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

#define WEFT_SIMD_TARGET WEFT_TARGET_AVX2

namespace weft::kernels::detail {
namespace {

struct F32x8 {
  static constexpr int kLanes = 8;
  __m256 v;
  WEFT_SIMD_INLINE static F32x8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  WEFT_SIMD_INLINE static F32x8 set1(float s) { return {_mm256_set1_ps(s)}; }
  WEFT_SIMD_INLINE static F32x8 zero() { return {_mm256_setzero_ps()}; }
  WEFT_SIMD_INLINE void store(float* p) const { _mm256_storeu_ps(p, v); }
  WEFT_SIMD_INLINE static F32x8 load_f16(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  WEFT_SIMD_INLINE void store_f16(uint16_t* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  friend WEFT_SIMD_INLINE F32x8 operator+(F32x8 a, F32x8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 operator-(F32x8 a, F32x8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 operator*(F32x8 a, F32x8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 operator/(F32x8 a, F32x8 b) { return {_mm256_div_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 fmadd(F32x8 a, F32x8 b, F32x8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  friend WEFT_SIMD_INLINE F32x8 fnmadd(F32x8 a, F32x8 b, F32x8 c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }
  friend WEFT_SIMD_INLINE F32x8 min(F32x8 a, F32x8 b) { return {_mm256_min_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 max(F32x8 a, F32x8 b) { return {_mm256_max_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x8 round(F32x8 a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  friend WEFT_SIMD_INLINE F32x8 mul_pow2(F32x8 p, F32x8 n) {  // p * 2^(n/2) * 2^(n - n/2)
    const __m256i ni = _mm256_cvtps_epi32(n.v), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return {_mm256_mul_ps(_mm256_mul_ps(p.v, s1), s2)};
  }
  friend WEFT_SIMD_INLINE F32x8 where_less(F32x8 a, F32x8 b, F32x8 x, F32x8 y) {
    return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
  }
  WEFT_SIMD_INLINE static F32x8 iota() { return {_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7)}; }
  friend WEFT_SIMD_INLINE F32x8 transpose_add(const F32x8* a) { return {avx2::transpose_add8(&a[0].v)}; }
  friend WEFT_SIMD_INLINE float reduce_add(F32x8 a) { return avx2::hsum(a.v); }
  friend WEFT_SIMD_INLINE float reduce_max(F32x8 a) { return avx2::hmax(a.v); }
};

}  // namespace
}  // namespace weft::kernels::detail

#include "kernels/ops_simd_table.h"

namespace weft::kernels::detail {
template <>
const OpsKernels& ops_table<Isa::Avx2>() {
  return simd::table<F32x8>(Isa::Avx2);
}
}  // namespace weft::kernels::detail

#undef WEFT_SIMD_TARGET
