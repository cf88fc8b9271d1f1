// Internal to the kquants_*.cpp files: ggml's K-quant block layouts, the scalar kernels and the SIMD table template.
//
// Layouts (ggml-common.h, QK_K = 256). A super-block of 256 values is cut into sub-blocks that
// each get a small integer scale (and for Q4_K/Q5_K a min), themselves scaled by the fp16 d/dmin,
// so a value costs ~4.5 / 5.5 / 6.56 bits:
//   Q4_K: x = d * sc[j] * q - dmin * m[j], q in [0, 15], 8 sub-blocks of 32
//   Q5_K: same with q in [0, 31] (fifth bit in qh)
//   Q6_K: x = d * sc[j] * (q - 32), q in [0, 63], 16 sub-blocks of 16, sc int8
//   Q2_K: x = d * sc[j] * q - dmin * m[j], q in [0, 3], 16 sub-blocks of 16, sc and m 4 bits
//   Q3_K: x = d * sc[j] * (q - 4), q in [0, 7] (third bit in hmask), 16 sub-blocks of 16, sc 6 bits - 32
//   Q8_K: x = d * q, q in [-127, 127], with bsums[j] = sum of q over each 16 values
#pragma once

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/kquants.h"
#include "kernels/rows_dot.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::kernels::kquants {

constexpr int kQK = 256;         // values per super-block (QK_K)
constexpr int kScaleBytes = 12;  // 8 six-bit scales + 8 six-bit mins (K_SCALE_SIZE)

// Element order of Q4_K/Q5_K qs: each 32 bytes hold 64 values, the low nibbles are values
// 0..31 of that chunk (sub-block 2c), the high nibbles values 32..63 (sub-block 2c + 1).
struct BlockQ4K {
  uint16_t d;                   // fp16 super-scale of the sub-block scales
  uint16_t dmin;                // fp16 super-scale of the sub-block mins
  uint8_t scales[kScaleBytes];  // packed as unpack_scales_mins() reads them
  uint8_t qs[kQK / 2];
};

// Like Q4_K; bit (2c + h) of qh[l] is the fifth bit of value l of half h of chunk c.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytes];
  uint8_t qh[kQK / 8];
  uint8_t qs[kQK / 2];
};

// Two halves of 128 values; in half h, value 32p + l (p = 0..3, l = 0..31) has its low 4 bits
// in ql[64h + l + 32(p & 1)] (low nibble for p < 2, high for p >= 2) and its top 2 bits at
// bit 2p of qh[32h + l]; its scale is scales[8h + 2p + l / 16].
struct BlockQ6K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;
};

// Q2_K and Q3_K share the order of their 2-bit levels: value 128h + 32p + l (h = 0..1, p = 0..3,
// l = 0..31) is bits 2p..2p+1 of qs[32h + l]; its sub-block is value / 16. Q3_K's third bit of it
// is bit 4h + p of hmask[l].
struct BlockQ2K {
  uint8_t scales[kQK / 16];  // sub-block j: sc in the low nibble, m in the high one
  uint8_t qs[kQK / 4];
  uint16_t d;     // fp16 super-scale of the sub-block scales
  uint16_t dmin;  // fp16 super-scale of the sub-block mins
};

struct BlockQ3K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[kScaleBytes];  // 16 six-bit scales, + 32, as unpack_q3_scales() reads them
  uint16_t d;
};

// Where value e (0..255) of a Q2_K / Q3_K block keeps its two low bits, and Q3_K its third bit.
inline int q2_level(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
inline void put_q2_level(uint8_t* qs, int e, int v) {
  qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((v & 3) << (2 * ((e % 128) / 32)));
}
inline int q3_third_bit(const uint8_t* hmask, int e) { return (hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1; }
inline void put_q3_third_bit(uint8_t* hmask, int e, int bit) {
  hmask[e % 32] |= static_cast<uint8_t>((bit & 1) << (4 * (e / 128) + (e % 128) / 32));
}

struct BlockQ8K {
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};

// Sizes GGUF files hold (dtype.cpp's table); the structs must not pad.
static_assert(sizeof(BlockQ2K) == 84);
static_assert(sizeof(BlockQ3K) == 110);
static_assert(sizeof(BlockQ4K) == 144);
static_assert(sizeof(BlockQ5K) == 176);
static_assert(sizeof(BlockQ6K) == 210);
static_assert(sizeof(BlockQ8K) == 292);

// The 12 scale bytes of Q4_K/Q5_K as 8 scales and 8 mins (6 bits each). Bytes 0..3 hold
// sc[0..3] in their low 6 bits, bytes 4..7 m[0..3]; sub-blocks 4..7 keep their low 4 bits in
// bytes 8..11 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits of
// bytes 0..3 (scales) and 4..7 (mins). Same result as ggml's get_scale_min_k4(j) for each j.
inline void unpack_scales_mins(const uint8_t* q, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    m[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0x0f) | ((q[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

// Inverse of unpack_scales_mins; every input must be < 64.
inline void pack_scales_mins(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

// unpack_scales_mins on 32-bit words, for the SIMD kernels: byte j of *sc / *m is sc[j] / m[j].
inline void unpack_scales_mins_x8(const uint8_t* q, uint64_t* sc, uint64_t* m) {
  uint32_t u[3];
  std::memcpy(u, q, sizeof(u));
  // (q[j] >> 6) << 4 is (word >> 2) & 0x30 per byte: the bits a byte receives from its upper
  // neighbour land in bits 6..7, which the mask drops.
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu, m_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);  // x86 is little-endian: byte j = sc[j]
  *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// The 12 scale bytes of Q3_K as 16 signed scales (stored value - 32). Bytes 0..7 hold the low 4
// bits of scale j (j < 8) in their low nibble and of scale j + 8 in their high one; byte 8 + k
// holds the top 2 bits of scales k, k + 4, k + 8 and k + 12 at bits 0, 2, 4 and 6 (ggml's
// dequantize_row_q3_K).
inline void unpack_q3_scales(const uint8_t* q, int8_t* sc) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? q[j] & 0x0f : q[j - 8] >> 4;
    const int high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
    sc[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// Inverse of unpack_q3_scales; every input must be in [-32, 31].
inline void pack_q3_scales(const int8_t* sc, uint8_t* q) {
  for (int k = 0; k < kScaleBytes; ++k) q[k] = 0;
  for (int j = 0; j < 16; ++j) {
    const int u = sc[j] + 32;
    q[j % 8] |= static_cast<uint8_t>((u & 0x0f) << (j < 8 ? 0 : 4));
    q[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
}

// Per-type scalar references (kquants_ref.cpp, kquants_quantize.cpp).
void dequantize_row_q2_K_ref(const void* src, float* dst, int64_t n);
void dequantize_row_q3_K_ref(const void* src, float* dst, int64_t n);
void quantize_row_q2_K_ref(const float* src, void* dst, int64_t n);
void quantize_row_q3_K_ref(const float* src, void* dst, int64_t n);
float vec_dot_q2_K_q8_K_ref(int64_t n, const void* w, const void* a);
float vec_dot_q3_K_q8_K_ref(int64_t n, const void* w, const void* a);
void dequantize_row_q4_K_ref(const void* src, float* dst, int64_t n);
void dequantize_row_q5_K_ref(const void* src, float* dst, int64_t n);
void dequantize_row_q6_K_ref(const void* src, float* dst, int64_t n);
void dequantize_row_q8_K_ref(const void* src, float* dst, int64_t n);
void quantize_row_q4_K_ref(const float* src, void* dst, int64_t n);
void quantize_row_q5_K_ref(const float* src, void* dst, int64_t n);
void quantize_row_q6_K_ref(const float* src, void* dst, int64_t n);
void quantize_row_q8_K_ref(const float* src, void* dst, int64_t n);
float vec_dot_q4_K_q8_K_ref(int64_t n, const void* w, const void* a);
float vec_dot_q5_K_q8_K_ref(int64_t n, const void* w, const void* a);
float vec_dot_q6_K_q8_K_ref(int64_t n, const void* w, const void* a);

// The AVX2 passes over R rows of Q2_K (kQ3 false) or Q3_K (kQ3 true), R = 1, 2, 4
// (kquants_avx2.cpp). The AVX-512 table offers them too: an AVX-512 CPU runs AVX2, and what it
// gains there is Q3_K's AVX-512 panel GEMM, which follows the level of the type's table entry.
template <int R, bool kQ3>
WEFT_TARGET_AVX2 void dot_rows_q23_K_avx2(int64_t n, const uint8_t* w, size_t w_stride, const void* act, float* out);

// The passes of a SIMD level's kernels (A, below) as rows_dot.h drives them.
template <class A, int kType>  // kType: 2 (Q2_K), 3 (Q3_K), 4 (Q4_K), 5 (Q5_K), 6 (Q6_K)
struct SimdDot {
  static constexpr int kPass = A::kGroupRows;
  template <int R>
  static constexpr DotRowsFn rows = kType == 2   ? A::template dot_q2<R>
                                    : kType == 3 ? A::template dot_q3<R>
                                    : kType == 6 ? A::template dot_q6<R>
                                                 : A::template dot_q45<R, kType == 5>;
};

// One weight type's entry of level A, its dot passes SimdDot<A, kType>.
template <class A, int kType>
constexpr TypeKernels simd_entry(DType t, DequantizeFn dequantize) {
  using D = SimdDot<A, kType>;
  return {t, DType::Q8_K, dequantize, A::quantize_q8, vec_dot<D>, rows_dot<D>, A::kIsa};
}

// The table of one SIMD level, written once. A (kquants_avx2.cpp, kquants_avx512.cpp) gives kIsa,
// kGroupRows (rows sharing each q8 load), dot_q45<R, kHigh> (Q4_K, or Q5_K when kHigh), dot_q6<R>,
// dot_q2<R> and dot_q3<R> (DotRowsFn over R rows), and quantize_q8 (f32 -> Q8_K, bit-identical to
// the ref). Dequantize stays scalar: it only runs off the hot path (the embedding lookup).
template <class A>
TypeTable simd_table_of() {
  static constexpr TypeKernels kTable[] = {
      simd_entry<A, 4>(DType::Q4_K, dequantize_row_q4_K_ref),
      simd_entry<A, 5>(DType::Q5_K, dequantize_row_q5_K_ref),
      simd_entry<A, 6>(DType::Q6_K, dequantize_row_q6_K_ref),
      {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, A::quantize_q8, nullptr, nullptr, A::kIsa},
      simd_entry<A, 2>(DType::Q2_K, dequantize_row_q2_K_ref),
      simd_entry<A, 3>(DType::Q3_K, dequantize_row_q3_K_ref),
  };
  return kTable;
}

}  // namespace weft::kernels::kquants
