// AVX-512 (F/BW/VL/DQ + VNNI) kernels for the float and legacy quant types (Isa::Avx512). Compiled
// with per-function target attributes (no per-file flags), run only where isa_supported(Isa::Avx512).
//
// Quant dots work on two blocks per 512-bit register and dpbusd (u8 x s8 -> s32). Weights with
// an offset (Q4_0: q - 8, Q5_0: q - 16, Q8_0 as q + 128 unsigned) are fed unsigned and the
// offset * sum(activation) is subtracted by starting dpbusd from -offset * sum(a); that term
// depends only on the activation, so rows_dot computes it once per block pair for 4 rows.
#include "kernels/quants_legacy.h"

#include "core/fp16.h"
#include "kernels/isa.h"

// GCC 12's _mm512_undefined_* (self-initialised on purpose) warn once inlined into target-attribute
// functions; the warnings are about the header, not this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/simd_avx2.h"

#define WEFT_SIMD_TARGET WEFT_TARGET_AVX512
#define WEFT_AVX512_INLINE WEFT_TARGET_AVX512 WEFT_ALWAYS_INLINE
#include "kernels/quants_legacy_simd.h"

namespace weft::kernels::legacy {
namespace {

using avx2::load128;
using avx2::load256;

// Rows sharing each activation load in rows_dot: 8 rows amortise the activation shuffles and
// offset sums (~15% faster than 4 in cache) and still fit their accumulators in 32 registers.
constexpr int kRowsPerPass = 8;

// Two fp16 values (low half first) -> lanes 0, 1 of a float vector.
WEFT_AVX512_INLINE __m128 half2(uint16_t a, uint16_t b) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(a | (static_cast<uint32_t>(b) << 16))));
}
// Two (d, m) / (d, s) fp16 pairs -> [d0, m0, d1, m1].
WEFT_AVX512_INLINE __m128 half4(const void* p0, const void* p1) {
  const uint64_t v = load_u32(p0) | (static_cast<uint64_t>(load_u32(p1)) << 32);
  return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(v)));
}

// Nibbles of two 4-bit blocks as 64 bytes [b0 0..15, b1 0..15, b0 16..31, b1 16..31]: the cheapest
// order to unpack; activations are shuffled to match once per pair (see load_q8_split).
WEFT_AVX512_INLINE __m512i unpack_nibbles(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i packed = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(qs0)), load128(qs1), 1);
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1);
  return _mm512_and_si512(both, _mm512_set1_epi8(0x0F));
}

// Two Q8 blocks' values in the nibble order above.
WEFT_AVX512_INLINE __m512i load_q8_split(const int8_t* q0, const int8_t* q1) {
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(load256(q0)), load256(q1), 1);
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}
WEFT_AVX512_INLINE __m512i load_q8_pair(const int8_t* q0, const int8_t* q1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(q0)), load256(q1), 1);
}

// Q5 high bits in the split order: bit i of the result is bit 4 of byte i.
inline uint64_t q5_mask_split(const uint8_t* qh0, const uint8_t* qh1) {
  const uint64_t a = load_u32(qh0), b = load_u32(qh1);
  return (a & 0xFFFF) | ((b & 0xFFFF) << 16) | ((a >> 16) << 32) | ((b >> 16) << 48);
}

WEFT_AVX512_INLINE __m512i neg_offset_sum(__m512i q, char offset) {
  return _mm512_sub_epi32(_mm512_setzero_si512(),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(offset), q));
}

// Scale lanes: dword lanes of the split order alternate b0 x4, b1 x4; the pair order b0 x8, b1 x8.
WEFT_AVX512_INLINE __m512i idx_split(int i0, int i1) {
  return _mm512_setr_epi32(i0, i0, i0, i0, i1, i1, i1, i1, i0, i0, i0, i0, i1, i1, i1, i1);
}

// Each K: A (activation block), W (weight block), kBlocks per step, Pair (activation data of one
// step, shared by the rows of a pass), load(a) and accumulate(w, pair, acc, acc_m). acc_m gathers
// the min terms of the _1 types in lanes 1 and 3.
// Q4_0 takes four blocks (72 bytes) per step: one word permute gathers their 64 nibble bytes
// into a register and another their four scales, so the per-block work is about half that of
// the two-block layout below (decode of Q4_0 is otherwise compute bound, not memory bound).
struct KQ4_0 {
  static constexpr int kBlocks = 4;
  using W = BlockQ4_0;
  using A = BlockQ8_0;
  struct Pair {
    __m512i lo, hi, neg_corr;  // activation elements 0..15 / 16..31 of the four blocks
    __m128 d;
  };
  WEFT_AVX512_INLINE static Pair load(const A* a) {
    const __m512i z01 = _mm512_inserti64x4(_mm512_castsi256_si512(load256(a[0].qs)), load256(a[1].qs), 1);
    const __m512i z23 = _mm512_inserti64x4(_mm512_castsi256_si512(load256(a[2].qs)), load256(a[3].qs), 1);
    const __m512i lo = _mm512_shuffle_i64x2(z01, z23, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i hi = _mm512_shuffle_i64x2(z01, z23, _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i eight = _mm512_set1_epi8(8);
    const __m512i corr = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, lo), eight, hi);
    const __m128i d = _mm_setr_epi16(static_cast<short>(a[0].d), static_cast<short>(a[1].d), static_cast<short>(a[2].d),
                                     static_cast<short>(a[3].d), 0, 0, 0, 0);
    return {lo, hi, _mm512_sub_epi32(_mm512_setzero_si512(), corr), _mm_cvtph_ps(d)};
  }
  WEFT_AVX512_INLINE static void accumulate(const W* w, const Pair& p, __m512& acc, __m128&) {
    // The 72 bytes as 36 words: block i's d is word 9i, its qs words 9i+1 .. 9i+8. Load words
    // 0..31 and 4..35 and gather; permutex2var index bit 5 picks the second load.
    const auto* base = reinterpret_cast<const uint8_t*>(w);
    const __m512i first = _mm512_loadu_si512(base), second = _mm512_loadu_si512(base + 8);
    alignas(64) static constexpr uint16_t kQsWords[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12,
                                                          13, 14, 15, 16, 17, 19, 20, 21, 22, 23, 24,
                                                          25, 26, 28, 29, 30, 31, 60, 61, 62, 63};
    alignas(64) static constexpr uint16_t kScaleWords[32] = {0, 9, 18, 27};
    const __m512i qs_idx = _mm512_load_si512(kQsWords);
    const __m512i qs = _mm512_permutex2var_epi16(first, qs_idx, second);
    const __m512i d_idx = _mm512_load_si512(kScaleWords);
    const __m128 dw = _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(d_idx, first)));
    const __m512i mask = _mm512_set1_epi8(0x0F);
    __m512i dot = _mm512_dpbusd_epi32(p.neg_corr, _mm512_and_si512(qs, mask), p.lo);
    dot = _mm512_dpbusd_epi32(dot, _mm512_and_si512(_mm512_srli_epi16(qs, 4), mask), p.hi);
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512 s = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_mul_ps(dw, p.d)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc);
  }
  static float tail(const W& w, const A& a) { return dot_block_q4_0(w, a); }
};

// Two-block step for the other types: the activation data of a block pair.
struct PairQ8 {
  __m512i q, neg_corr;
  __m128 d;
};

struct KQ5_0 {
  static constexpr int kBlocks = 2;
  using W = BlockQ5_0;
  using A = BlockQ8_0;
  using Pair = PairQ8;
  WEFT_AVX512_INLINE static Pair load(const A* a) {
    const __m512i q = load_q8_split(a[0].qs, a[1].qs);
    return {q, neg_offset_sum(q, 16), half2(a[0].d, a[1].d)};
  }
  WEFT_AVX512_INLINE static void accumulate(const W* w, const Pair& p, __m512& acc, __m128&) {
    const __m512i lo = unpack_nibbles(w[0].qs, w[1].qs);
    const __m512i q5 = _mm512_mask_add_epi8(lo, q5_mask_split(w[0].qh, w[1].qh), lo, _mm512_set1_epi8(16));
    const __m512i dot = _mm512_dpbusd_epi32(p.neg_corr, q5, p.q);
    const __m128 s = _mm_mul_ps(half2(w[0].d, w[1].d), p.d);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx_split(0, 1), _mm512_castps128_ps512(s)),
                          acc);
  }
  static float tail(const W& w, const A& a) { return dot_block_q5_0(w, a); }
};

struct KQ8_0 {
  static constexpr int kBlocks = 2;
  using W = BlockQ8_0;
  using A = BlockQ8_0;
  using Pair = PairQ8;
  WEFT_AVX512_INLINE static Pair load(const A* a) {
    const __m512i q = load_q8_pair(a[0].qs, a[1].qs);
    return {q, neg_offset_sum(q, static_cast<char>(0x80)), half2(a[0].d, a[1].d)};
  }
  WEFT_AVX512_INLINE static void accumulate(const W* w, const Pair& p, __m512& acc, __m128&) {
    const __m512i wu = _mm512_xor_si512(load_q8_pair(w[0].qs, w[1].qs), _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i dot = _mm512_dpbusd_epi32(p.neg_corr, wu, p.q);
    const __m128 s = _mm_mul_ps(half2(w[0].d, w[1].d), p.d);
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s)), acc);
  }
  static float tail(const W& w, const A& a) { return dot_block_q8_0(w, a); }
};

// _1 types: element = q * d + m, so dot = d_w d_a sum(q a) + m_w s_a with s_a = d_a sum(a).
struct Pair1 {
  __m512i q;
  __m128 ds;  // [d_a0, s_a0, d_a1, s_a1]
};

// s = [d_w0 d_a0, m_w0 s_a0, d_w1 d_a1, m_w1 s_a1]: lanes 0/2 scale the int dots, 1/3 go to acc_m.
WEFT_AVX512_INLINE void accumulate_1(__m512i dot, __m128 s, __m512& acc, __m128& acc_m) {
  acc =
      _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(idx_split(0, 2), _mm512_castps128_ps512(s)), acc);
  acc_m = _mm_add_ps(acc_m, s);
}

struct KQ4_1 {
  static constexpr int kBlocks = 2;
  using W = BlockQ4_1;
  using A = BlockQ8_1;
  using Pair = Pair1;
  WEFT_AVX512_INLINE static Pair load(const A* a) { return {load_q8_split(a[0].qs, a[1].qs), half4(&a[0].d, &a[1].d)}; }
  WEFT_AVX512_INLINE static void accumulate(const W* w, const Pair& p, __m512& acc, __m128& acc_m) {
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), unpack_nibbles(w[0].qs, w[1].qs), p.q);
    accumulate_1(dot, _mm_mul_ps(half4(&w[0].d, &w[1].d), p.ds), acc, acc_m);
  }
  static float tail(const W& w, const A& a) { return dot_block_q4_1(w, a); }
};

struct KQ5_1 {
  static constexpr int kBlocks = 2;
  using W = BlockQ5_1;
  using A = BlockQ8_1;
  using Pair = Pair1;
  WEFT_AVX512_INLINE static Pair load(const A* a) { return {load_q8_split(a[0].qs, a[1].qs), half4(&a[0].d, &a[1].d)}; }
  WEFT_AVX512_INLINE static void accumulate(const W* w, const Pair& p, __m512& acc, __m128& acc_m) {
    const __m512i lo = unpack_nibbles(w[0].qs, w[1].qs);
    const __m512i q5 = _mm512_mask_add_epi8(lo, q5_mask_split(w[0].qh, w[1].qh), lo, _mm512_set1_epi8(16));
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q5, p.q);
    accumulate_1(dot, _mm_mul_ps(half4(&w[0].d, &w[1].d), p.ds), acc, acc_m);
  }
  static float tail(const W& w, const A& a) { return dot_block_q5_1(w, a); }
};

// R rows (stride bytes apart) against one activation row, K::kBlocks blocks per step, activation
// loads and offset sums shared by the R rows; leftover blocks go through the scalar block dot.
template <class K, int R>
WEFT_TARGET_AVX512 void dot_rows(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const int64_t nb = n / kQK;
  const auto* a = static_cast<const typename K::A*>(act);
  const typename K::W* rows[R];
  __m512 acc[R];
  __m128 acc_m[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const typename K::W*>(w + r * stride);
    acc[r] = _mm512_setzero_ps();
    acc_m[r] = _mm_setzero_ps();
  }
  int64_t b = 0;
  const size_t ahead = prefetch_ahead(R, stride);  // rows_dot.h
  for (; b + K::kBlocks <= nb; b += K::kBlocks) {
    const typename K::Pair p = K::load(a + b);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const char* next = reinterpret_cast<const char*>(rows[r] + b) + ahead;
      _mm_prefetch(next, _MM_HINT_T0);
      if constexpr (sizeof(typename K::W) * K::kBlocks > 64) _mm_prefetch(next + 64, _MM_HINT_T0);
      K::accumulate(rows[r] + b, p, acc[r], acc_m[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(16) float m[4];
    _mm_store_ps(m, acc_m[r]);
    float s = _mm512_reduce_add_ps(acc[r]) + (m[1] + m[3]);
    for (int64_t i = b; i < nb; ++i) s += K::tail(rows[r][i], a[i]);
    out[r] = s;
  }
}

// Float weights against f32 activations; L::load(p, i) gives 16 weights as f32, L::load_tail
// the first `mask` of them.
struct LF32 {
  using T = float;
  WEFT_AVX512_INLINE static __m512 load(const T* p) { return _mm512_loadu_ps(p); }
  WEFT_AVX512_INLINE static __m512 load_tail(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LF16 {
  using T = uint16_t;
  WEFT_AVX512_INLINE static __m512 load(const T* p) { return _mm512_cvtph_ps(load256(p)); }
  WEFT_AVX512_INLINE static __m512 load_tail(const T* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct LBF16 {
  using T = uint16_t;
  WEFT_AVX512_INLINE static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  WEFT_AVX512_INLINE static __m512 load(const T* p) { return widen(load256(p)); }
  WEFT_AVX512_INLINE static __m512 load_tail(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <class L, int R>
WEFT_TARGET_AVX512 void dot_rows_float(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const auto* x = static_cast<const float*>(act);
  const typename L::T* rows[R];
  __m512 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const typename L::T*>(w + r * stride);
    acc[r] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(L::load(rows[r] + i), xv, acc[r]);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(L::load_tail(rows[r] + i, m), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// ---- activation quantizers (quants_legacy_simd.h), bit-identical to the ref ----

// roundf (half away from zero), exactly: v - trunc(v) is exact in float.
WEFT_AVX512_INLINE __m512 round_half_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.f), _mm512_and_ps(v, _mm512_set1_ps(-0.f)));
  return _mm512_mask_add_ps(t, up, t, one);
}

struct QuantizeQ8 {
  // Quantizes 32 floats to qs with scale d = amax / 127 (as ref); returns sum(qs) and d in f32.
  WEFT_AVX512_INLINE static int block(const float* x, uint16_t* d_out, int8_t* qs, float& d_f32);
};

WEFT_AVX512_INLINE int QuantizeQ8::block(const float* x, uint16_t* d_out, int8_t* qs, float& d_f32) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  *d_out = f32_to_fp16(d);
  d_f32 = d;
  const __m512 idv = _mm512_set1_ps(id);
  const __m512i q0 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v0, idv)));
  const __m512i q1 = _mm512_cvtps_epi32(round_half_away(_mm512_mul_ps(v1, idv)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}

// ---- dequantize (exactly the ref's products) ----

WEFT_TARGET_AVX512 void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m512 d = _mm512_set1_ps(fp16_to_f32(b[i].d));
    const __m512i q = _mm512_cvtepu8_epi32(load128(b[i].qs));
    const __m512i eight = _mm512_set1_epi32(8);
    const __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0F)), eight);
    const __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
  }
}

WEFT_TARGET_AVX512 void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m512 d = _mm512_set1_ps(fp16_to_f32(b[i].d));
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(b[i].qs))), d));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(b[i].qs + 16))), d));
  }
}

template <class L>
WEFT_TARGET_AVX512 void dequantize_float(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const typename L::T*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, L::load(p + i));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, L::load_tail(p + i, m));
  }
}

// This file's kernels, as simd::table_of takes them.
struct Avx512Kernels {
  static constexpr Isa kIsa = Isa::Avx512;
  static constexpr int kRowsPerPass = legacy::kRowsPerPass;
  using KQ4_0 = legacy::KQ4_0;
  using KQ4_1 = legacy::KQ4_1;
  using KQ5_0 = legacy::KQ5_0;
  using KQ5_1 = legacy::KQ5_1;
  using KQ8_0 = legacy::KQ8_0;
  using LF32 = legacy::LF32;
  using LF16 = legacy::LF16;
  using LBF16 = legacy::LBF16;
  using QuantizeQ8 = legacy::QuantizeQ8;
  template <class K, int R>
  static constexpr DotRowsFn dot = dot_rows<K, R>;
  template <class L, int R>
  static constexpr DotRowsFn dot_float = dot_rows_float<L, R>;
  template <class L>
  static constexpr DequantizeFn dequant_float = dequantize_float<L>;
  static constexpr DequantizeFn dequant_q4_0 = dequantize_q4_0;
  static constexpr DequantizeFn dequant_q8_0 = dequantize_q8_0;
};

}  // namespace

template <>
TypeTable table<Isa::Avx512>() {
  return simd::table_of<Avx512Kernels>();
}

template <>
ActBlocksFn act_blocks<Isa::Avx512>(DType t) {
  return simd::act_blocks_of<Avx512Kernels::QuantizeQ8>(t);
}

}  // namespace weft::kernels::legacy

#undef WEFT_AVX512_INLINE
#undef WEFT_SIMD_TARGET
