// Scalar references of the K-quant kernels: dequantize, f32 -> Q8_K, and the dot of a weight row
// with a Q8_K row. These define correct for the SIMD variants; the weight quantizers live in
// kquants_quantize.cpp.
#include "core/error.h"
#include "kernels/kquants_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace weft::kernels::kquants {

namespace {

int64_t n_blocks(int64_t n) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  return n / kQK;
}

// Value e (0..255) of a Q4_K/Q5_K block: its 4 low bits, and which sub-block it is in.
inline int nibble_at(const uint8_t* qs, int e) {
  const int c = e / 64, within = e % 64;
  const uint8_t byte = qs[32 * c + within % 32];
  return within < 32 ? (byte & 0x0f) : (byte >> 4);
}

inline int q5_high_bit(const uint8_t* qh, int e) {
  const int c = e / 64, within = e % 64;
  return (qh[within % 32] >> (2 * c + within / 32)) & 1;
}

// Q6_K value e (0..255) in [0, 63], before the -32 offset.
inline int q6_at(const BlockQ6K& b, int e) {
  const int h = e / 128, p = (e % 128) / 32, l = e % 32;
  const uint8_t lo_byte = b.ql[64 * h + l + 32 * (p & 1)];
  const int lo = p < 2 ? (lo_byte & 0x0f) : (lo_byte >> 4);
  const int hi = (b.qh[32 * h + l] >> (2 * p)) & 3;
  return lo | (hi << 4);
}

// Q3_K value e in [0, 7], before the -4 offset (ggml: the level minus 4 where the bit is clear).
inline int q3_at(const BlockQ3K& b, int e) { return q2_level(b.qs, e) | (q3_third_bit(b.hmask, e) << 2); }

inline int q6_scale_index(int e) {
  const int h = e / 128, p = (e % 128) / 32, l = e % 32;
  return 8 * h + 2 * p + l / 16;
}

}  // namespace

void dequantize_row_q4_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ4K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scales_mins(x[i].scales, sc, m);
    for (int e = 0; e < kQK; ++e) {
      const int j = e / 32;
      dst[i * kQK + e] = d * sc[j] * nibble_at(x[i].qs, e) - dmin * m[j];
    }
  }
}

void dequantize_row_q5_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ5K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    uint8_t sc[8], m[8];
    unpack_scales_mins(x[i].scales, sc, m);
    for (int e = 0; e < kQK; ++e) {
      const int j = e / 32;
      const int q = nibble_at(x[i].qs, e) | (q5_high_bit(x[i].qh, e) << 4);
      dst[i * kQK + e] = d * sc[j] * q - dmin * m[j];
    }
  }
}

void dequantize_row_q6_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ6K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int e = 0; e < kQK; ++e) dst[i * kQK + e] = d * x[i].scales[q6_scale_index(e)] * (q6_at(x[i], e) - 32);
  }
}

void dequantize_row_q2_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ2K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    for (int e = 0; e < kQK; ++e) {
      const uint8_t s = x[i].scales[e / 16];
      dst[i * kQK + e] = d * (s & 0x0f) * q2_level(x[i].qs, e) - dmin * (s >> 4);
    }
  }
}

void dequantize_row_q3_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ3K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float d = fp16_to_f32(x[i].d);
    int8_t sc[16];
    unpack_q3_scales(x[i].scales, sc);
    for (int e = 0; e < kQK; ++e) dst[i * kQK + e] = d * sc[e / 16] * (q3_at(x[i], e) - 4);
  }
}

void dequantize_row_q8_K_ref(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const BlockQ8K*>(src);
  for (int64_t i = 0; i < n_blocks(n); ++i)
    for (int e = 0; e < kQK; ++e) dst[i * kQK + e] = x[i].d * x[i].qs[e];
}

// Symmetric: d = amax / 127 (stored as 1 / (127 / amax), as ggml does), q = round-to-nearest-even
// of x * 127 / amax. The SIMD variants compute the same float products and round the same way,
// so they match this bit for bit. ggml scales by the signed max instead; either is valid Q8_K.
void quantize_row_q8_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int e = 0; e < kQK; ++e) amax = std::max(amax, std::fabs(x[e]));
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8K));
      continue;
    }
    const float iscale = 127.0f / amax;
    for (int e = 0; e < kQK; ++e) {
      const float v = std::nearbyint(iscale * x[e]);
      y[i].qs[e] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
    for (int j = 0; j < kQK / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

// Per block: d * y.d * sum_j sc[j] * (q . q8 over sub-block j) - dmin * y.d * sum_j m[j] *
// (sum of q8 over sub-block j); the second sum comes from bsums, as ggml does, so the min term
// costs 8 multiplies instead of 256. Integer sums are exact; only the per-block scale is float.
float vec_dot_q4_K_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    uint8_t sc[8], m[8];
    unpack_scales_mins(x[i].scales, sc, m);
    int32_t sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t s = 0;
      for (int e = 32 * j; e < 32 * j + 32; ++e) s += nibble_at(x[i].qs, e) * y[i].qs[e];
      sum_q += sc[j] * s;
      sum_m += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += y[i].d * (fp16_to_f32(x[i].d) * sum_q - fp16_to_f32(x[i].dmin) * sum_m);
  }
  return sum;
}

float vec_dot_q5_K_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    uint8_t sc[8], m[8];
    unpack_scales_mins(x[i].scales, sc, m);
    int32_t sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t s = 0;
      for (int e = 32 * j; e < 32 * j + 32; ++e)
        s += (nibble_at(x[i].qs, e) | (q5_high_bit(x[i].qh, e) << 4)) * y[i].qs[e];
      sum_q += sc[j] * s;
      sum_m += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
    }
    sum += y[i].d * (fp16_to_f32(x[i].d) * sum_q - fp16_to_f32(x[i].dmin) * sum_m);
  }
  return sum;
}

// Q2_K: as Q4_K with 16 sub-blocks of 16, each bsums entry one sub-block's q8 sum.
float vec_dot_q2_K_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ2K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    int32_t sum_q = 0, sum_m = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += q2_level(x[i].qs, e) * y[i].qs[e];
      sum_q += (x[i].scales[j] & 0x0f) * s;
      sum_m += (x[i].scales[j] >> 4) * y[i].bsums[j];
    }
    sum += y[i].d * (fp16_to_f32(x[i].d) * sum_q - fp16_to_f32(x[i].dmin) * sum_m);
  }
  return sum;
}

// Q3_K: the -4 offset through bsums, as Q6_K's -32 below.
float vec_dot_q3_K_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ3K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    int8_t sc[16];
    unpack_q3_scales(x[i].scales, sc);
    int32_t sum_q = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += q3_at(x[i], e) * y[i].qs[e];
      sum_q += sc[j] * (s - 4 * y[i].bsums[j]);
    }
    sum += y[i].d * fp16_to_f32(x[i].d) * sum_q;
  }
  return sum;
}

// The -32 offset of Q6_K is folded in through bsums too: sum (q - 32) q8 = sum q q8 - 32 bsum.
float vec_dot_q6_K_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    int32_t sum_q = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += q6_at(x[i], e) * y[i].qs[e];
      WEFT_ASSERT(q6_scale_index(16 * j) == j);  // 16 consecutive values share one scale
      sum_q += x[i].scales[j] * (s - 32 * y[i].bsums[j]);
    }
    sum += y[i].d * fp16_to_f32(x[i].d) * sum_q;
  }
  return sum;
}

}  // namespace weft::kernels::kquants
