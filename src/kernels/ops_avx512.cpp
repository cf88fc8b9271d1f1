// AVX-512 table of the float ops (ops_simd.h over 16 lanes). Only this file's functions are
// compiled for AVX-512, so the binary still runs on CPUs without it (ops.cpp picks the table at run time).

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_ps() (GCC PR105593,
// fixed in 12.3); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

#define WEFT_SIMD_TARGET WEFT_TARGET_AVX512

namespace weft::kernels::detail {
namespace {

struct F32x16 {
  static constexpr int kLanes = 16;
  __m512 v;
  WEFT_SIMD_INLINE static F32x16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  WEFT_SIMD_INLINE static F32x16 set1(float s) { return {_mm512_set1_ps(s)}; }
  WEFT_SIMD_INLINE static F32x16 zero() { return {_mm512_setzero_ps()}; }
  WEFT_SIMD_INLINE void store(float* p) const { _mm512_storeu_ps(p, v); }
  WEFT_SIMD_INLINE static F32x16 load_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  WEFT_SIMD_INLINE void store_f16(uint16_t* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  friend WEFT_SIMD_INLINE F32x16 operator+(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 operator-(F32x16 a, F32x16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 operator*(F32x16 a, F32x16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 operator/(F32x16 a, F32x16 b) { return {_mm512_div_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  friend WEFT_SIMD_INLINE F32x16 fnmadd(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }
  friend WEFT_SIMD_INLINE F32x16 min(F32x16 a, F32x16 b) { return {_mm512_min_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 max(F32x16 a, F32x16 b) { return {_mm512_max_ps(a.v, b.v)}; }
  friend WEFT_SIMD_INLINE F32x16 round(F32x16 a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  friend WEFT_SIMD_INLINE F32x16 mul_pow2(F32x16 p, F32x16 n) {  // p * 2^(n/2) * 2^(n - n/2)
    const __m512i ni = _mm512_cvtps_epi32(n.v), n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    return {_mm512_mul_ps(_mm512_mul_ps(p.v, s1), s2)};
  }
  friend WEFT_SIMD_INLINE F32x16 where_less(F32x16 a, F32x16 b, F32x16 x, F32x16 y) {
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
  }
  WEFT_SIMD_INLINE static F32x16 iota() {
    return {_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)};
  }
  friend WEFT_SIMD_INLINE F32x16 transpose_add(const F32x16* a) {  // halves first, then two 8 x 8 trees
    __m256 h[16];
    for (int k = 0; k < 16; ++k)
      h[k] = _mm256_add_ps(_mm512_castps512_ps256(a[k].v),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[k].v), 1)));
    const __m256 lo = avx2::transpose_add8(h), hi = avx2::transpose_add8(h + 8);
    return {
        _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1))};
  }
  friend WEFT_SIMD_INLINE float reduce_add(F32x16 a) { return _mm512_reduce_add_ps(a.v); }
  friend WEFT_SIMD_INLINE float reduce_max(F32x16 a) { return _mm512_reduce_max_ps(a.v); }
};

}  // namespace
}  // namespace weft::kernels::detail

#include "kernels/ops_simd_table.h"

namespace weft::kernels::detail {
template <>
const OpsKernels& ops_table<Isa::Avx512>() {
  return simd::table<F32x16>(Isa::Avx512);
}
}  // namespace weft::kernels::detail

#undef WEFT_SIMD_TARGET
