// AVX2 + FMA table of the float ops' inner loops: 8 lanes, then the scalar tail of ops_ref.cpp.
// Compiled for the baseline ISA; only these functions carry the target attribute, so the
// binary still runs on CPUs without AVX2 (ops.cpp picks the table at run time).
#include "kernels/ops.h"

#include <immintrin.h>

#include <algorithm>
#include "kernels/simd_avx2.h"

#define WEFT_AVX2 __attribute__((target("avx2,fma")))

namespace weft::kernels::detail {

float sum_sq_ref(const float* x, int64_t n);
void scale_mul_ref(const float* x, float s, const float* w, float* y, int64_t n);
float dot_ref(const float* a, const float* b, int64_t n);
void axpy_ref(float a, const float* x, float* y, int64_t n);
float max_ref(const float* x, int64_t n);
float exp_sum_ref(float* x, float m, int64_t n);
void scale_ref(float* x, float s, int64_t n);
void swiglu_ref(const float* gate, const float* up, float* out, int64_t n);
void add_ref(float* y, const float* x, int64_t n);

namespace {

using avx2::hmax;
using avx2::hsum;

// exp(x) to ~2 ulp: x = n ln2 + r with |r| <= ln2/2, exp(r) by the Cephes expf polynomial,
// then 2^n applied as two factors 2^(n/2) 2^(n - n/2) so that n up to +-150 neither wraps the
// exponent field nor needs a special case: large x overflows to inf, very negative x to 0.
WEFT_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in a high part exact in float and a low correction (Cody-Waite).
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

WEFT_AVX2 float sum_sq_avx2(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // two accumulators hide the FMA latency
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  return hsum(_mm256_add_ps(a0, a1)) + sum_sq_ref(x + i, n - i);
}

WEFT_AVX2 void scale_mul_avx2(const float* x, float s, const float* w, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  }
  scale_mul_ref(x + i, s, w ? w + i : nullptr, y + i, n - i);
}

WEFT_AVX2 float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
  return hsum(_mm256_add_ps(a0, a1)) + dot_ref(a + i, b + i, n - i);
}

WEFT_AVX2 void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  axpy_ref(a, x + i, y + i, n - i);
}

WEFT_AVX2 float max_avx2(const float* x, int64_t n) {
  if (n < 8) return max_ref(x, n);
  __m256 m = _mm256_loadu_ps(x);
  int64_t i = 8;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  const float hm = hmax(m);
  return i < n ? std::max(hm, max_ref(x + i, n - i)) : hm;
}

WEFT_AVX2 float exp_sum_avx2(float* x, float m, int64_t n) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  return hsum(acc) + exp_sum_ref(x + i, m, n - i);
}

WEFT_AVX2 void scale_avx2(float* x, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  scale_ref(x + i, s, n - i);
}

WEFT_AVX2 void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    // silu(g) = g / (1 + exp(-g)); exp overflowing to inf for g < -88 gives the right -0.
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  swiglu_ref(gate + i, up + i, out + i, n - i);
}

WEFT_AVX2 void add_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  add_ref(y + i, x + i, n - i);
}

}  // namespace

const OpsKernels& ops_kernels_avx2() {
  static const OpsKernels k{sum_sq_avx2, scale_mul_avx2, dot_avx2,    axpy_avx2, max_avx2, exp_sum_avx2,
                            scale_avx2,  swiglu_avx2,    add_avx2,    "avx2"};
  return k;
}

}  // namespace weft::kernels::detail
