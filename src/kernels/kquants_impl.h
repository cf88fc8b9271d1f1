// Internal to the kquants_*.cpp files: ggml's K-quant block layouts, the scalar kernels and the SIMD table template.
//
// Layouts (ggml-common.h, QK_K = 256). A super-block of 256 values is cut into sub-blocks that
// each get a small integer scale (and for Q4_K/Q5_K a min), themselves scaled by the fp16 d/dmin,
// so a value costs ~4.5 / 5.5 / 6.56 bits:
//   Q4_K: x = d * sc[j] * q - dmin * m[j], q in [0, 15], 8 sub-blocks of 32
//   Q5_K: same with q in [0, 31] (fifth bit in qh)
//   Q6_K: x = d * sc[j] * (q - 32), q in [0, 63], 16 sub-blocks of 16, sc int8
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

struct BlockQ8K {
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};

// Sizes GGUF files hold (dtype.cpp's table); the structs must not pad.
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

// Per-type scalar references (kquants_ref.cpp, kquants_quantize.cpp).
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

// The passes of a SIMD level's kernels (A, below) as rows_dot.h drives them.
template <class A, int kType>  // kType: 4 (Q4_K), 5 (Q5_K), 6 (Q6_K)
struct SimdDot {
  static constexpr int kPass = A::kGroupRows;
  template <int R>
  static constexpr DotRowsFn rows = kType == 6 ? A::template dot_q6<R> : A::template dot_q45<R, kType == 5>;
};

// The table of one SIMD level, written once. A (kquants_avx2.cpp, kquants_avx512.cpp) gives kIsa,
// kGroupRows (rows sharing each q8 load), dot_q45<R, kHigh> (Q4_K, or Q5_K when kHigh) and
// dot_q6<R> (DotRowsFn over R rows), and quantize_q8 (f32 -> Q8_K, bit-identical to the ref).
// Dequantize stays scalar: it only runs off the hot path (the embedding lookup).
template <class A>
TypeTable simd_table_of() {
  using Q4 = SimdDot<A, 4>;
  using Q5 = SimdDot<A, 5>;
  using Q6 = SimdDot<A, 6>;
  static constexpr TypeKernels kTable[] = {
      {DType::Q4_K, DType::Q8_K, dequantize_row_q4_K_ref, A::quantize_q8, vec_dot<Q4>, rows_dot<Q4>, A::kIsa},
      {DType::Q5_K, DType::Q8_K, dequantize_row_q5_K_ref, A::quantize_q8, vec_dot<Q5>, rows_dot<Q5>, A::kIsa},
      {DType::Q6_K, DType::Q8_K, dequantize_row_q6_K_ref, A::quantize_q8, vec_dot<Q6>, rows_dot<Q6>, A::kIsa},
      {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, A::quantize_q8, nullptr, nullptr, A::kIsa},
  };
  return kTable;
}

}  // namespace weft::kernels::kquants
