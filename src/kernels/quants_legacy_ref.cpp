// Scalar reference kernels for the float and legacy quant types: the definition of correct.
// Quantizers follow ggml's quantize_row_*_ref rounding exactly, so files we write load in llama.cpp
// and the SIMD activation quantizers can be checked bit for bit against these.
#include "kernels/quants_legacy.h"

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/rows_dot.h"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace weft::kernels::legacy {
namespace {

// ---- dequantize ----

void dequantize_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      dst[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      dst[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// Element j of a Q5 block as its unsigned 5-bit value.
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return lo | static_cast<int>(((qh >> j) & 1u) << 4);
}

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(q5_value(b[i].qs, qh, j) - 16) * d;
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(q5_value(b[i].qs, qh, j)) * d + m;
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// ---- quantize ----

void quantize_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

// The value of largest magnitude, sign kept: symmetric types map it to the most negative level,
// which has one more step than the positive side.
float signed_absmax(const float* x) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src) / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
      const int x1 = std::min(15, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 8.5f)));
      b[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
    }
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, min, max);
    const float d = (max - min) / 15.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - min) * id + 0.5f)));
      const int x1 = std::min(15, static_cast<int>(static_cast<int8_t>((src[j + 16] - min) * id + 0.5f)));
      b[i].qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
    }
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src) / -16.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f)));
      const int x1 = std::min(31, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 16.5f)));
      b[i].qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((x0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((x1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    float min, max;
    min_max(src, min, max);
    const float d = (max - min) / 31.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      const int x1 = static_cast<uint8_t>((src[j + 16] - min) * id + 0.5f);
      b[i].qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((x0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((x1 >> 4) & 1) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

float absmax(const float* x) {
  float amax = 0.f;
  for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = absmax(src) / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = absmax(src) / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
      sum += b[i].qs[j];
    }
    b[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

// ---- dot products (accumulated in double: this is the yardstick the SIMD kernels are held to) ----

float vec_dot_f32(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * y[i];
  return static_cast<float>(s);
}

float vec_dot_f16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(fp16_to_f32(x[i])) * y[i];
  return static_cast<float>(s);
}

float vec_dot_bf16(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(bf16_to_f32(x[i])) * y[i];
  return static_cast<float>(s);
}

template <typename W, typename A, float (*kBlockDot)(const W&, const A&)>
float vec_dot_blocks(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const W*>(w);
  const auto* y = static_cast<const A*>(a);
  double s = 0;
  for (int64_t i = 0; i < n / kQK; ++i) s += kBlockDot(x[i], y[i]);
  return static_cast<float>(s);
}

constexpr auto kDotQ4_0 = vec_dot_blocks<BlockQ4_0, BlockQ8_0, dot_block_q4_0>;
constexpr auto kDotQ4_1 = vec_dot_blocks<BlockQ4_1, BlockQ8_1, dot_block_q4_1>;
constexpr auto kDotQ5_0 = vec_dot_blocks<BlockQ5_0, BlockQ8_0, dot_block_q5_0>;
constexpr auto kDotQ5_1 = vec_dot_blocks<BlockQ5_1, BlockQ8_1, dot_block_q5_1>;
constexpr auto kDotQ8_0 = vec_dot_blocks<BlockQ8_0, BlockQ8_0, dot_block_q8_0>;

constexpr TypeKernels kRefTable[] = {
    {DType::F32, DType::F32, dequantize_f32, quantize_f32, vec_dot_f32, rows_dot_each<vec_dot_f32>, Isa::Scalar},
    {DType::F16, DType::F32, dequantize_f16, quantize_f32, vec_dot_f16, rows_dot_each<vec_dot_f16>, Isa::Scalar},
    {DType::BF16, DType::F32, dequantize_bf16, quantize_f32, vec_dot_bf16, rows_dot_each<vec_dot_bf16>, Isa::Scalar},
    {DType::Q4_0, DType::Q8_0, dequantize_q4_0, quantize_q8_0, kDotQ4_0, rows_dot_each<kDotQ4_0>, Isa::Scalar},
    {DType::Q4_1, DType::Q8_1, dequantize_q4_1, quantize_q8_1, kDotQ4_1, rows_dot_each<kDotQ4_1>, Isa::Scalar},
    {DType::Q5_0, DType::Q8_0, dequantize_q5_0, quantize_q8_0, kDotQ5_0, rows_dot_each<kDotQ5_0>, Isa::Scalar},
    {DType::Q5_1, DType::Q8_1, dequantize_q5_1, quantize_q8_1, kDotQ5_1, rows_dot_each<kDotQ5_1>, Isa::Scalar},
    {DType::Q8_0, DType::Q8_0, dequantize_q8_0, quantize_q8_0, kDotQ8_0, rows_dot_each<kDotQ8_0>, Isa::Scalar},
};

}  // namespace

float dot_block_q4_0(const BlockQ4_0& w, const BlockQ8_0& a) {
  int sumi = 0;
  for (int j = 0; j < kQK / 2; ++j) sumi += ((w.qs[j] & 0x0F) - 8) * a.qs[j] + ((w.qs[j] >> 4) - 8) * a.qs[j + 16];
  return static_cast<float>(sumi) * (fp16_to_f32(w.d) * fp16_to_f32(a.d));
}

float dot_block_q4_1(const BlockQ4_1& w, const BlockQ8_1& a) {
  int sumi = 0;
  for (int j = 0; j < kQK / 2; ++j) sumi += (w.qs[j] & 0x0F) * a.qs[j] + (w.qs[j] >> 4) * a.qs[j + 16];
  return static_cast<float>(sumi) * (fp16_to_f32(w.d) * fp16_to_f32(a.d)) + fp16_to_f32(w.m) * fp16_to_f32(a.s);
}

float dot_block_q5_0(const BlockQ5_0& w, const BlockQ8_0& a) {
  const uint32_t qh = load_u32(w.qh);
  int sumi = 0;
  for (int j = 0; j < kQK; ++j) sumi += (q5_value(w.qs, qh, j) - 16) * a.qs[j];
  return static_cast<float>(sumi) * (fp16_to_f32(w.d) * fp16_to_f32(a.d));
}

float dot_block_q5_1(const BlockQ5_1& w, const BlockQ8_1& a) {
  const uint32_t qh = load_u32(w.qh);
  int sumi = 0;
  for (int j = 0; j < kQK; ++j) sumi += q5_value(w.qs, qh, j) * a.qs[j];
  return static_cast<float>(sumi) * (fp16_to_f32(w.d) * fp16_to_f32(a.d)) + fp16_to_f32(w.m) * fp16_to_f32(a.s);
}

float dot_block_q8_0(const BlockQ8_0& w, const BlockQ8_0& a) {
  int sumi = 0;
  for (int j = 0; j < kQK; ++j) sumi += w.qs[j] * a.qs[j];
  return static_cast<float>(sumi) * (fp16_to_f32(w.d) * fp16_to_f32(a.d));
}

bool handles(DType t) { return has_kernels(t) || t == DType::Q8_1; }

bool has_kernels(DType t) { return find_type(kRefTable, t) != nullptr; }

template <>
TypeTable table<Isa::Scalar>() {
  return kRefTable;
}

template <>
ActBlocksFn act_blocks<Isa::Scalar>(DType) {
  return nullptr;  // the scalar level keeps the two steps (quantize_ref, then prepare_act_row)
}

void dequantize_ref(DType t, const void* src, float* dst, int64_t n) {
  if (t == DType::Q8_1) return dequantize_q8_1(src, dst, n);
  const TypeKernels* k = find_type(kRefTable, t);
  if (!k) fail("kernels", "no dequantize for type {}", dtype_name(t));
  k->dequantize(src, dst, n);
}

void quantize_ref(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::F32: return quantize_f32(src, dst, n);
    case DType::F16: return quantize_f16(src, dst, n);
    case DType::BF16: return quantize_bf16(src, dst, n);
    case DType::Q4_0: return quantize_q4_0(src, dst, n);
    case DType::Q4_1: return quantize_q4_1(src, dst, n);
    case DType::Q5_0: return quantize_q5_0(src, dst, n);
    case DType::Q5_1: return quantize_q5_1(src, dst, n);
    case DType::Q8_0: return quantize_q8_0(src, dst, n);
    case DType::Q8_1: return quantize_q8_1(src, dst, n);
    default: fail("kernels", "no quantize for type {}", dtype_name(t));
  }
}

float vec_dot_ref(DType weight, int64_t n, const void* w_row, const void* act_row) {
  const TypeKernels* k = find_type(kRefTable, weight);
  if (!k) fail("kernels", "no vec_dot for weight type {}", dtype_name(weight));
  return k->vec_dot(n, w_row, act_row);
}

}  // namespace weft::kernels::legacy
