// AVX-512F table of the float ops' inner loops: 16 lanes, then the scalar tail of ops_ref.cpp.
// Compiled for the baseline ISA; only these functions carry the target attribute, so the
// binary still runs on CPUs without AVX-512 (ops.cpp picks the table at run time).
#include "kernels/ops.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_ps() (GCC PR105593,
// fixed in 12.3); the warning points into the header, so silencing it there hides nothing of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>

#define WEFT_AVX512 __attribute__((target("avx512f")))

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

// exp(x) as exp8 in ops_avx2.cpp, 16 lanes.
WEFT_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

WEFT_AVX512 float sum_sq_avx512(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // two accumulators hide the FMA latency
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + sum_sq_ref(x + i, n - i);
}

WEFT_AVX512 void scale_mul_avx512(const float* x, float s, const float* w, float* y, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  if (w) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(w + i)));
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  }
  scale_mul_ref(x + i, s, w ? w + i : nullptr, y + i, n - i);
}

WEFT_AVX512 float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), a1);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), a0);
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + dot_ref(a + i, b + i, n - i);
}

WEFT_AVX512 void axpy_avx512(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  axpy_ref(a, x + i, y + i, n - i);
}

WEFT_AVX512 float max_avx512(const float* x, int64_t n) {
  if (n < 16) return max_ref(x, n);
  __m512 m = _mm512_loadu_ps(x);
  int64_t i = 16;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
  const float hm = _mm512_reduce_max_ps(m);
  return i < n ? std::max(hm, max_ref(x + i, n - i)) : hm;
}

WEFT_AVX512 float exp_sum_avx512(float* x, float m, int64_t n) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc) + exp_sum_ref(x + i, m, n - i);
}

WEFT_AVX512 void scale_avx512(float* x, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  scale_ref(x + i, s, n - i);
}

WEFT_AVX512 void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    // silu(g) = g / (1 + exp(-g)); exp overflowing to inf for g < -88 gives the right -0.
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  swiglu_ref(gate + i, up + i, out + i, n - i);
}

WEFT_AVX512 void add_avx512(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
  add_ref(y + i, x + i, n - i);
}

}  // namespace

const OpsKernels& ops_kernels_avx512() {
  static const OpsKernels k{sum_sq_avx512, scale_mul_avx512, dot_avx512, axpy_avx512, max_avx512,
                            exp_sum_avx512, scale_avx512,    swiglu_avx512, add_avx512, "avx512"};
  return k;
}

}  // namespace weft::kernels::detail
