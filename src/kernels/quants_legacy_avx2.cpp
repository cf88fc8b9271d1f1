// AVX2 + FMA + F16C kernels for the float and legacy quant types (Isa::Avx2). Compiled with
// per-function target attributes (no per-file flags), run only where isa_supported(Isa::Avx2).
//
// Quant dots take one block per 256-bit register: maddubs (u8 x s8 -> s16 pairs) then madd by 1
// (-> s32). Offsets (Q4_0: q - 8, Q5_0: q - 16) are removed in the s16 pairs by subtracting
// maddubs(offset, a), computed once per block for the rows of a pass. No pair can saturate:
// |(q - 16) a0 + (q' - 16) a1| <= 2 * 16 * 128.
#include "kernels/quants_legacy.h"

#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

#include <immintrin.h>

#define WEFT_SIMD_TARGET WEFT_TARGET_AVX2
#define WEFT_AVX2_INLINE WEFT_TARGET_AVX2 WEFT_ALWAYS_INLINE
#include "kernels/quants_legacy_simd.h"

namespace weft::kernels::legacy {
namespace {

using avx2::hsum;
using avx2::load128;
using avx2::load256;

constexpr int kRowsPerPass = 4;  // rows sharing each activation load in rows_dot

WEFT_AVX2_INLINE float half(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of nibbles -> 32 bytes in element order (low nibbles are elements 0..15).
WEFT_AVX2_INLINE __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// Q5 high bits: byte i is 16 where bit i of qh is set.
WEFT_AVX2_INLINE __m256i q5_high(const uint8_t* qh) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(load_u32(qh))), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(16));
}

WEFT_AVX2_INLINE __m256 pairs_to_f32(__m256i p16) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// Each K: Act (activation block), W (weight block), Blk (activation data of one block shared by
// the rows of a pass), load(a) and accumulate(w, blk, acc, acc_m); acc_m holds the _1 types' min terms.
struct Blk {
  __m256i q, corr;  // corr: offset * (a0 + a1) per s16 pair
  float d, s;
};

WEFT_AVX2_INLINE Blk load_q8(const int8_t* qs, uint16_t d, char offset) {
  const __m256i q = load256(qs);
  return {q, _mm256_maddubs_epi16(_mm256_set1_epi8(offset), q), half(d), 0.f};
}

struct KQ4_0 {
  using W = BlockQ4_0;
  using A = BlockQ8_0;
  WEFT_AVX2_INLINE static Blk load(const A& a) { return load_q8(a.qs, a.d, 8); }
  WEFT_AVX2_INLINE static void accumulate(const W& w, const Blk& b, __m256& acc, float&) {
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(unpack_nibbles(w.qs), b.q), b.corr);
    acc = _mm256_fmadd_ps(pairs_to_f32(p), _mm256_set1_ps(half(w.d) * b.d), acc);
  }
};

struct KQ5_0 {
  using W = BlockQ5_0;
  using A = BlockQ8_0;
  WEFT_AVX2_INLINE static Blk load(const A& a) { return load_q8(a.qs, a.d, 16); }
  WEFT_AVX2_INLINE static void accumulate(const W& w, const Blk& b, __m256& acc, float&) {
    const __m256i q5 = _mm256_or_si256(unpack_nibbles(w.qs), q5_high(w.qh));
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q5, b.q), b.corr);
    acc = _mm256_fmadd_ps(pairs_to_f32(p), _mm256_set1_ps(half(w.d) * b.d), acc);
  }
};

// Signed x signed: |w| x (a with w's sign). |w a0 + w' a1| <= 2 * 128 * 127 fits s16 because
// quantized activations never hold -128.
struct KQ8_0 {
  using W = BlockQ8_0;
  using A = BlockQ8_0;
  WEFT_AVX2_INLINE static Blk load(const A& a) { return {load256(a.qs), _mm256_setzero_si256(), half(a.d), 0.f}; }
  WEFT_AVX2_INLINE static void accumulate(const W& w, const Blk& b, __m256& acc, float&) {
    const __m256i x = load256(w.qs);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(b.q, x));
    acc = _mm256_fmadd_ps(pairs_to_f32(p), _mm256_set1_ps(half(w.d) * b.d), acc);
  }
};

// _1 types: dot = d_w d_a sum(q a) + m_w s_a.
struct KQ4_1 {
  using W = BlockQ4_1;
  using A = BlockQ8_1;
  WEFT_AVX2_INLINE static Blk load(const A& a) { return {load256(a.qs), _mm256_setzero_si256(), half(a.d), half(a.s)}; }
  WEFT_AVX2_INLINE static void accumulate(const W& w, const Blk& b, __m256& acc, float& acc_m) {
    const __m256i p = _mm256_maddubs_epi16(unpack_nibbles(w.qs), b.q);
    acc = _mm256_fmadd_ps(pairs_to_f32(p), _mm256_set1_ps(half(w.d) * b.d), acc);
    acc_m += half(w.m) * b.s;
  }
};

struct KQ5_1 {
  using W = BlockQ5_1;
  using A = BlockQ8_1;
  WEFT_AVX2_INLINE static Blk load(const A& a) { return KQ4_1::load(a); }
  WEFT_AVX2_INLINE static void accumulate(const W& w, const Blk& b, __m256& acc, float& acc_m) {
    const __m256i q5 = _mm256_or_si256(unpack_nibbles(w.qs), q5_high(w.qh));
    acc = _mm256_fmadd_ps(pairs_to_f32(_mm256_maddubs_epi16(q5, b.q)), _mm256_set1_ps(half(w.d) * b.d), acc);
    acc_m += half(w.m) * b.s;
  }
};

// R rows (stride bytes apart) against one activation row, block by block.
template <class K, int R>
WEFT_TARGET_AVX2 void dot_rows(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const int64_t nb = n / kQK;
  const auto* a = static_cast<const typename K::A*>(act);
  const typename K::W* rows[R];
  __m256 acc[R];
  float acc_m[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const typename K::W*>(w + r * stride);
    acc[r] = _mm256_setzero_ps();
    acc_m[r] = 0.f;
  }
  // Prefetch (rows_dot.h) once per kStep blocks, which span under 64 bytes: every line of the row
  // gets one, at a fraction of a prefetch per block.
  constexpr int kStep = sizeof(typename K::W) >= 64 ? 1 : 64 / static_cast<int>(sizeof(typename K::W));
  const size_t ahead = prefetch_ahead(R, stride);
  int64_t b = 0;
  for (; b + kStep <= nb; b += kStep) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) prefetch_lines<1>(reinterpret_cast<const uint8_t*>(rows[r] + b) + ahead);
#pragma GCC unroll 3
    for (int k = 0; k < kStep; ++k) {
      const Blk blk = K::load(a[b + k]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) K::accumulate(rows[r][b + k], blk, acc[r], acc_m[r]);
    }
  }
  for (; b < nb; ++b) {
    const Blk blk = K::load(a[b]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) K::accumulate(rows[r][b], blk, acc[r], acc_m[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) + acc_m[r];
}

// Float weights against f32 activations: L::load gives 8 weights as f32, L::one a single one.
struct LF32 {
  using T = float;
  WEFT_AVX2_INLINE static __m256 load(const T* p) { return _mm256_loadu_ps(p); }
  static float one(T v) { return v; }
};
struct LF16 {
  using T = uint16_t;
  WEFT_AVX2_INLINE static __m256 load(const T* p) { return _mm256_cvtph_ps(load128(p)); }
  static float one(T v) { return fp16_to_f32(v); }
};
struct LBF16 {
  using T = uint16_t;
  WEFT_AVX2_INLINE static __m256 load(const T* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static float one(T v) { return bf16_to_f32(v); }
};

template <class L, int R>
WEFT_TARGET_AVX2 void dot_rows_float(int64_t n, const uint8_t* w, size_t stride, const void* act, float* out) {
  const auto* x = static_cast<const float*>(act);
  const typename L::T* rows[R];
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const typename L::T*>(w + r * stride);
    acc[r] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(L::load(rows[r] + i), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = hsum(acc[r]);
    for (int64_t j = i; j < n; ++j) s += L::one(rows[r][j]) * x[j];
    out[r] = s;
  }
}

// ---- activation quantizers (quants_legacy_simd.h), bit-identical to the ref ----

// roundf (half away from zero), exactly: v - trunc(v) is exact in float.
WEFT_AVX2_INLINE __m256 round_half_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.f), _mm256_and_ps(v, sign));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

struct QuantizeQ8 {
  // Quantizes 32 floats to qs with d = amax / 127 (as ref); returns sum(qs) and d in f32.
  WEFT_AVX2_INLINE static int block(const float* x, uint16_t* d_out, int8_t* qs, float& d_f32);
};

WEFT_AVX2_INLINE int QuantizeQ8::block(const float* x, uint16_t* d_out, int8_t* qs, float& d_f32) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float d = _mm_cvtss_f32(m4) / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  *d_out = f32_to_fp16(d);
  d_f32 = d;
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
  const __m256i sum4 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  // packs interleave 128-bit lanes; the permute puts the 4-byte groups back in element order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum4), _mm256_extracti128_si256(sum4, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// ---- dequantize (exactly the ref's products) ----

WEFT_TARGET_AVX2 void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  const __m256i eight = _mm256_set1_epi32(8), low = _mm256_set1_epi32(0x0F);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m256 d = _mm256_set1_ps(half(b[i].d));
    const __m128i q = load128(b[i].qs);
    for (int h = 0; h < 2; ++h) {  // elements 8h..8h+7 and 16+8h..16+8h+7
      const __m256i v = _mm256_cvtepu8_epi32(h == 0 ? q : _mm_srli_si128(q, 8));
      const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(v, low), eight);
      const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight);
      _mm256_storeu_ps(dst + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
      _mm256_storeu_ps(dst + 16 + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
    }
  }
}

WEFT_TARGET_AVX2 void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const __m256 d = _mm256_set1_ps(half(b[i].d));
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k)));
      _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
    }
  }
}

template <class L>
WEFT_TARGET_AVX2 void dequantize_float(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const typename L::T*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, L::load(p + i));
  for (; i < n; ++i) dst[i] = L::one(p[i]);
}

// This file's kernels, as simd::table_of takes them.
struct Avx2Kernels {
  static constexpr Isa kIsa = Isa::Avx2;
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
TypeTable table<Isa::Avx2>() {
  return simd::table_of<Avx2Kernels>();
}

template <>
ActBlocksFn act_blocks<Isa::Avx2>(DType t) {
  return simd::act_blocks_of<Avx2Kernels::QuantizeQ8>(t);
}

}  // namespace weft::kernels::legacy

#undef WEFT_AVX2_INLINE
#undef WEFT_SIMD_TARGET
