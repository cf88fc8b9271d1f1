// Scalar references of the float ops: the definition of correct that the SIMD tables and the
// dispatching ops are tested against. Plain loops, no tricks.
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/ops.h"

#include <cmath>

namespace weft::kernels {

void rms_norm_ref(const float* x, const float* w, float* y, int64_t n_tokens, int64_t n, float eps) {
  WEFT_ASSERT(n > 0 && n_tokens >= 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xr = x + t * n;
    float* yr = y + t * n;
    double sum = 0.0;  // ggml sums squares in ggml_float (double) too
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * (w ? w[i] : 1.0f);
  }
}

namespace detail {

// The scalar table: the "ref" ISA, and the tail loops every SIMD table ends in.
float sum_sq_ref(const float* x, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

void scale_mul_ref(const float* x, float s, const float* w, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s * (w ? w[i] : 1.0f);
}

float max_ref(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float exp_sum_ref(float* x, float m, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  return s;
}

void scale_ref(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void swiglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu_ref(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* table = gelu_f16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.f ? 0.f : x >= 10.f ? x : fp16_to_f32(table[f32_to_fp16(x)]);
    out[i] = g * up[i];
  }
}

void add_ref(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void to_f16_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void silu_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.f + std::exp(-x[i]));  // as ggml_silu_f32
}

void attention_rows_scalar(const AttentionRows& rows);  // ops_attention.cpp
void attention_decode_scalar(const AttentionRows& rows);

template <>
const OpsKernels& ops_table<Isa::Scalar>() {
  static const OpsKernels k{sum_sq_ref,
                            scale_mul_ref,
                            max_ref,
                            exp_sum_ref,
                            scale_ref,
                            silu_ref,
                            swiglu_ref,
                            geglu_ref,
                            add_ref,
                            to_f16_ref,
                            attention_rows_scalar,
                            attention_decode_scalar,
                            delta_step_ref,
                            delta_chunk_ref,
                            Isa::Scalar};
  return k;
}

}  // namespace detail
}  // namespace weft::kernels
