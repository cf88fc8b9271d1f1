// The float ops' inner loops, written once against a vector type V of V::kLanes floats (the
// Simd<T, N> idea of MLX): full vectors, then the scalar tail of ops_ref.cpp (swiglu's tail runs
// through the vectors too). ops_avx2.cpp and ops_avx512.cpp each define their V and
// WEFT_SIMD_TARGET (the function attribute of their ISA) before including this, so each
// instantiation is compiled for its own ISA while the binary runs on CPUs without it.
// V provides: load, store, set1, zero, + - * /, fmadd(a, b, c) = a*b + c, fnmadd = c - a*b,
// min, max, round (to nearest), mul_pow2(p, n) = p * 2^n for integral n, reduce_add, reduce_max,
// where_less(a, b, x, y) = a < b ? x : y per lane, load_f16 / store_f16 (IEEE half, nearest even),
// iota() = (0, 1, ..., kLanes - 1), transpose_add(a[kLanes]) = (reduce_add(a[0]), reduce_add(a[1]), ...).
#pragma once

#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef WEFT_SIMD_TARGET
#error "define WEFT_SIMD_TARGET (the ISA's target attribute) before including ops_simd.h"
#endif

namespace weft::kernels::detail {

float sum_sq_ref(const float* x, int64_t n);
void scale_mul_ref(const float* x, float s, const float* w, float* y, int64_t n);
float max_ref(const float* x, int64_t n);
float exp_sum_ref(float* x, float m, int64_t n);
void scale_ref(float* x, float s, int64_t n);
void add_ref(float* y, const float* x, int64_t n);
void to_f16_ref(const float* x, uint16_t* y, int64_t n);
void geglu_ref(const float* gate, const float* up, float* out, int64_t n);
void silu_ref(const float* x, float* y, int64_t n);
void delta_columns_ref(const DeltaStep& s, int64_t j0, int64_t j1);

namespace simd {

// exp(x) to ~2 ulp: x = n ln2 + r with |r| <= ln2/2, exp(r) by the Cephes expf polynomial, then
// 2^n applied by mul_pow2 (as two factors, so that n up to +-150 neither wraps the exponent field
// nor needs a special case): large x overflows to inf, very negative x to 0.
template <class V>
WEFT_SIMD_INLINE V exp(V x) {
  x = min(max(x, V::set1(-104.0f)), V::set1(89.0f));
  const V n = round(x * V::set1(1.44269504088896341f));
  // ln2 split in a high part exact in float and a low correction (Cody-Waite).
  V r = fnmadd(n, V::set1(0.693359375f), x);
  r = fnmadd(n, V::set1(-2.12194440e-4f), r);
  V p = V::set1(1.9875691500e-4f);
  p = fmadd(p, r, V::set1(1.3981999507e-3f));
  p = fmadd(p, r, V::set1(8.3334519073e-3f));
  p = fmadd(p, r, V::set1(4.1665795894e-2f));
  p = fmadd(p, r, V::set1(1.6666665459e-1f));
  p = fmadd(p, r, V::set1(5.0000001201e-1f));
  p = fmadd(p, r * r, r + V::set1(1.0f));
  return mul_pow2(p, n);
}

template <class V>
WEFT_SIMD_TARGET float sum_sq(const float* x, int64_t n) {
  constexpr int64_t L = V::kLanes;
  V a0 = V::zero(), a1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {  // two accumulators hide the FMA latency
    const V v0 = V::load(x + i), v1 = V::load(x + i + L);
    a0 = fmadd(v0, v0, a0);
    a1 = fmadd(v1, v1, a1);
  }
  for (; i + L <= n; i += L) {
    const V v = V::load(x + i);
    a0 = fmadd(v, v, a0);
  }
  return reduce_add(a0 + a1) + sum_sq_ref(x + i, n - i);
}

template <class V>
WEFT_SIMD_TARGET void scale_mul(const float* x, float s, const float* w, float* y, int64_t n) {
  constexpr int64_t L = V::kLanes;
  const V vs = V::set1(s);
  int64_t i = 0;
  if (w) {
    for (; i + L <= n; i += L) (V::load(x + i) * vs * V::load(w + i)).store(y + i);
  } else {
    for (; i + L <= n; i += L) (V::load(x + i) * vs).store(y + i);
  }
  scale_mul_ref(x + i, s, w ? w + i : nullptr, y + i, n - i);
}

template <class V>
WEFT_SIMD_TARGET float max_of(const float* x, int64_t n) {
  constexpr int64_t L = V::kLanes;
  if (n < L) return max_ref(x, n);
  V m = V::load(x);
  int64_t i = L;
  for (; i + L <= n; i += L) m = max(m, V::load(x + i));
  const float hm = reduce_max(m);
  return i < n ? std::max(hm, max_ref(x + i, n - i)) : hm;
}

template <class V>
WEFT_SIMD_TARGET float exp_sum(float* x, float m, int64_t n) {
  constexpr int64_t L = V::kLanes;
  const V vm = V::set1(m);
  V acc = V::zero();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V e = exp(V::load(x + i) - vm);
    e.store(x + i);
    acc = acc + e;
  }
  return reduce_add(acc) + exp_sum_ref(x + i, m, n - i);
}

template <class V>
WEFT_SIMD_TARGET void scale(float* x, float s, int64_t n) {
  constexpr int64_t L = V::kLanes;
  const V vs = V::set1(s);
  int64_t i = 0;
  for (; i + L <= n; i += L) (V::load(x + i) * vs).store(x + i);
  scale_ref(x + i, s, n - i);
}

// silu(g) = g / (1 + exp(-g)); exp overflowing to inf for g < -88 gives the right -0.
template <class V>
WEFT_SIMD_INLINE V silu_lanes(V g) {
  return g / (V::set1(1.0f) + exp(V::zero() - g));
}

template <class V>
WEFT_SIMD_TARGET void silu(const float* x, float* y, int64_t n) {
  constexpr int64_t L = V::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) silu_lanes(V::load(x + i)).store(y + i);
  if (i < n) {  // the tail through the same lanes
    float t[L] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(t, x + i, bytes);
    silu_lanes(V::load(t)).store(t);
    std::memcpy(y + i, t, bytes);
  }
}

template <class V>
WEFT_SIMD_TARGET void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  constexpr int64_t L = V::kLanes;
  auto lanes = [&](const float* g_in, const float* u_in, float* o)
                   WEFT_SIMD_TARGET { (silu_lanes(V::load(g_in)) * V::load(u_in)).store(o); };
  int64_t i = 0;
  for (; i + L <= n; i += L) lanes(gate + i, up + i, out + i);
  // The tail through the same lanes: a value's bits do not depend on where a split's slice of the
  // FFN ends (--exact).
  if (i < n) {
    float g[L] = {}, u[L] = {}, o[L];
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(g, gate + i, bytes);
    std::memcpy(u, up + i, bytes);
    lanes(g, u, o);
    std::memcpy(out + i, o, bytes);
  }
}

// geglu_ref's values: the gate to halves and back by the vector conversions (nearest even, as
// f32_to_fp16), the GELU of each half from the table; out may be gate (in place).
template <class V>
WEFT_SIMD_TARGET void geglu(const float* gate, const float* up, float* out, int64_t n) {
  constexpr int64_t L = V::kLanes;
  const uint16_t* table = gelu_f16_table();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    alignas(64) float g[L], u[L];
    alignas(64) uint16_t h[L];
    const V gate_v = V::load(gate + i), up_v = V::load(up + i);
    gate_v.store(g);
    up_v.store(u);
    gate_v.store_f16(h);
    for (int64_t j = 0; j < L; ++j) h[j] = table[h[j]];
    (V::load_f16(h) * up_v).store(out + i);
    for (int64_t j = 0; j < L; ++j)  // past the table's range: 0, or the gate itself
      if (g[j] <= -10.f || g[j] >= 10.f) out[i + j] = (g[j] <= -10.f ? 0.f : g[j]) * u[j];
  }
  geglu_ref(gate + i, up + i, out + i, n - i);
}

template <class V>
WEFT_SIMD_TARGET void add(float* y, const float* x, int64_t n) {
  constexpr int64_t L = V::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) (V::load(y + i) + V::load(x + i)).store(y + i);
  add_ref(y + i, x + i, n - i);
}

template <class V>
WEFT_SIMD_TARGET void to_f16(const float* x, uint16_t* y, int64_t n) {
  constexpr int64_t L = V::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) V::load(x + i).store_f16(y + i);
  to_f16_ref(x + i, y + i, n - i);
}

// NB vectors of value features [j0, j0 + NB L): their sums over the key rows stay in registers (no
// horizontal adds), and the state's columns they cover (n rows of NB L) stay in L1 between the
// two passes: decay and S^T k, then the correction and S^T q.
template <class V, int NB>
WEFT_SIMD_TARGET void delta_columns(const DeltaStep& s, int64_t j0) {
  constexpr int64_t L = V::kLanes;
  // Locals: the state's stores may not alias them (the compiler would reload s's floats).
  const int64_t n = s.n;
  float* const state = s.state + j0;
  const float *const k = s.k, *const q = s.q;
  const V decay = V::set1(s.decay), beta = V::set1(s.beta), scale = V::set1(s.scale);
  V acc[NB], err[NB];
  for (int b = 0; b < NB; ++b) acc[b] = V::zero();
  for (int64_t i = 0; i < n; ++i) {
    float* row = state + i * n;
    const V ki = V::set1(k[i]);
    for (int b = 0; b < NB; ++b) {
      const V r = V::load(row + b * L) * decay;
      r.store(row + b * L);
      acc[b] = fmadd(ki, r, acc[b]);
    }
  }
  for (int b = 0; b < NB; ++b) {
    err[b] = (V::load(s.v + j0 + b * L) - acc[b]) * beta;
    acc[b] = V::zero();
  }
  for (int64_t i = 0; i < n; ++i) {
    float* row = state + i * n;
    const V ki = V::set1(k[i]), qi = V::set1(q[i]);
    for (int b = 0; b < NB; ++b) {
      const V r = fmadd(ki, err[b], V::load(row + b * L));
      r.store(row + b * L);
      acc[b] = fmadd(qi, r, acc[b]);
    }
  }
  for (int b = 0; b < NB; ++b) (acc[b] * scale).store(s.out + j0 + b * L);
}

template <class V>
WEFT_SIMD_TARGET void delta_step(const DeltaStep& s) {
  // As many value features a pass as the registers hold sums and corrections for (8 + 8 of 32
  // AVX-512 registers: a head of 128 in one pass, its state read in order, twice).
  constexpr int kVectors = V::kLanes >= 16 ? 8 : 4;
  constexpr int64_t L = V::kLanes, kBlock = kVectors * L;
  int64_t j = 0;
  for (; j + kBlock <= s.n; j += kBlock) delta_columns<V, kVectors>(s, j);
  for (; j + L <= s.n; j += L) delta_columns<V, 1>(s, j);
  if (j < s.n) delta_columns_ref(s, j, s.n);  // the last value features, one by one
}

// y[r] = a y[r] + sum_{i<k} x[r xs + i] M[i] over TB rows from r0 and JB vectors from j0 (rows of
// y and M n floats): each load of M's rows serves TB rows, the sums stay in registers.
template <class V, int TB, int JB>
WEFT_SIMD_TARGET void rows_by_matrix_block(const float* x, int64_t xs, int64_t k, const float* M, int64_t n, float a,
                                           float* y, int64_t r0, int64_t j0) {
  constexpr int64_t L = V::kLanes;
  V acc[TB][JB];
  for (int t = 0; t < TB; ++t)
    for (int b = 0; b < JB; ++b) acc[t][b] = a == 0 ? V::zero() : V::load(y + (r0 + t) * n + j0 + b * L) * V::set1(a);
  for (int64_t i = 0; i < k; ++i) {
    V r[JB];
    for (int b = 0; b < JB; ++b) r[b] = V::load(M + i * n + j0 + b * L);
    for (int t = 0; t < TB; ++t) {
      const V xi = V::set1(x[(r0 + t) * xs + i]);
      for (int b = 0; b < JB; ++b) acc[t][b] = fmadd(xi, r[b], acc[t][b]);
    }
  }
  for (int t = 0; t < TB; ++t)
    for (int b = 0; b < JB; ++b) acc[t][b].store(y + (r0 + t) * n + j0 + b * L);
}

template <class V, int TB>
WEFT_SIMD_TARGET void rows_by_matrix_rows(const float* x, int64_t xs, int64_t k, const float* M, int64_t n, float a,
                                          float* y, int64_t r0) {
  constexpr int64_t L = V::kLanes;
  int64_t j = 0;
  for (; j + 4 * L <= n; j += 4 * L) rows_by_matrix_block<V, TB, 4>(x, xs, k, M, n, a, y, r0, j);
  for (; j < n; j += L) rows_by_matrix_block<V, TB, 1>(x, xs, k, M, n, a, y, r0, j);
}

// The chunk's matrix products, m rows (n a multiple of the lanes): as many rows a block as the
// registers hold sums for beside M's vectors (4 x 4 of AVX-512's 32, 2 x 4 of AVX2's 16).
template <class V>
WEFT_SIMD_TARGET void rows_by_matrix(const float* x, int64_t xs, int64_t m, int64_t k, const float* M, int64_t n,
                                     float a, float* y) {
  constexpr int TB = V::kLanes >= 16 ? 4 : 2;
  int64_t r = 0;
  for (; r + TB <= m; r += TB) rows_by_matrix_rows<V, TB>(x, xs, k, M, n, a, y, r);
  for (; r < m; ++r) rows_by_matrix_rows<V, 1>(x, xs, k, M, n, a, y, r);
}

// The corrections u_t and outputs of NB vectors of value features from j0, token after token (the
// columns are independent: each u_t reads the u_s before it in the same columns).
template <class V, int NB>
WEFT_SIMD_TARGET void delta_chunk_columns(const DeltaChunk& c, const DeltaChunkWork& w, int64_t j0) {
  constexpr int64_t L = V::kLanes, C = kDeltaChunk;
  const int64_t n = c.n;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const V g = V::set1(delta_decay(w.log_g[t])), beta = V::set1(c.beta[t]);
    float* u = w.u + t * n + j0;
    const float* v = c.v + t * c.v_stride + j0;
    V x[NB], o[NB];
    for (int b = 0; b < NB; ++b) x[b] = (V::load(v + b * L) - g * V::load(u + b * L)) * beta;
    for (int64_t s = 0; s < t; ++s) {
      const V a = V::set1(w.kk[t * C + s]);
      const float* us = w.u + s * n + j0;
      for (int b = 0; b < NB; ++b) x[b] = fnmadd(a, V::load(us + b * L), x[b]);
    }
    for (int b = 0; b < NB; ++b) {
      x[b].store(u + b * L);
      o[b] = g * V::load(w.p + t * n + j0 + b * L);
    }
    for (int64_t s = 0; s <= t; ++s) {
      const V a = V::set1(w.qk[t * C + s]);
      const float* us = w.u + s * n + j0;
      for (int b = 0; b < NB; ++b) o[b] = fmadd(a, V::load(us + b * L), o[b]);
    }
    const V scale = V::set1(c.scale);
    for (int b = 0; b < NB; ++b) (o[b] * scale).store(c.out + t * c.v_stride + j0 + b * L);
  }
}

// delta_chunk_ref's steps, each as vector loops (heads a multiple of the lanes; others take the
// scalar form whole).
template <class V>
WEFT_SIMD_TARGET void delta_chunk(const DeltaChunk& c) {
  constexpr int64_t L = V::kLanes, C = kDeltaChunk;
  const int64_t n = c.n, m = c.n_tokens;
  if (n % L != 0) return delta_chunk_ref(c);
  const DeltaChunkWork w = delta_chunk_prepare(c);
  rows_by_matrix<V>(w.k, n, m, n, c.state, n, 0.f, w.u);  // S_0^T k_t
  rows_by_matrix<V>(w.q, n, m, n, c.state, n, 0.f, w.p);  // S_0^T q_t
  rows_by_matrix<V>(w.k, n, m, n, w.k_t, C, 0.f, w.kk);   // k_t . k_s
  rows_by_matrix<V>(w.q, n, m, n, w.k_t, C, 0.f, w.qk);   // q_t . k_s
  delta_chunk_coefficients(c, w);
  constexpr int kVectors = L >= 16 ? 8 : 4;
  int64_t j = 0;
  for (; j + kVectors * L <= n; j += kVectors * L) delta_chunk_columns<V, kVectors>(c, w, j);
  for (; j < n; j += L) delta_chunk_columns<V, 1>(c, w, j);
  rows_by_matrix<V>(w.k_t, C, n, m, w.u, n, delta_decay(w.log_g[m - 1]), c.state);  // g_m S_0 + sum k u^T
}

// GCC 12, inlining this into attention's cache tiles, proves nothing and warns that the tail loop
// "invokes undefined behavior" at iteration 2^63-1, which n (a tile's width) never reaches.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
template <class V>
WEFT_SIMD_TARGET void from_f16(const uint16_t* x, float* y, int64_t n) {
  constexpr int64_t L = V::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) V::load_f16(x + i).store(y + i);
  for (; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}
#pragma GCC diagnostic pop

}  // namespace simd
}  // namespace weft::kernels::detail
