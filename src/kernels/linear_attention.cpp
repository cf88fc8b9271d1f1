#include "kernels/linear_attention.h"

#include "kernels/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace weft::kernels {

void causal_conv_silu(const float* x, int64_t n_tokens, int64_t n, int64_t stride, const float* taps, int64_t kernel,
                      float* state, float* y) {
  const int64_t held = kernel - 1;
  // Row s of [the state's held rows; the step's]: inputs of every feature at one position.
  auto input = [&](int64_t r) { return r < held ? state + r * stride : x + (r - held) * stride; };
  const auto& ops = ops_kernels();
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* out = y + t * stride;
    for (int64_t c = 0; c < n; ++c) out[c] = 0;
    for (int64_t j = 0; j < kernel; ++j) {  // taps in ggml_ssm_conv's order, the current input last
      const float *in = input(t + j), *w = taps + j * stride;
      for (int64_t c = 0; c < n; ++c) out[c] += in[c] * w[c];
    }
    ops.silu(out, out, n);
  }
  // The last held inputs become the state; in order, each read before it is overwritten.
  for (int64_t r = 0; r < held; ++r) std::memmove(state + r * stride, input(n_tokens + r), n * sizeof(float));
}

void l2_norm_heads(float* x, int64_t n_heads, int64_t head_dim, float eps) {
  const auto& ops = ops_kernels();
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    double sum = 0;  // in double, as ggml_l2_norm
    for (int64_t i = 0; i < head_dim; ++i) sum += static_cast<double>(p[i]) * p[i];
    ops.scale(p, 1.f / std::max(std::sqrt(static_cast<float>(sum)), eps), head_dim);
  }
}

DeltaGates delta_gates(float beta, float alpha, float a, float dt) {
  const float x = alpha + dt;
  const float softplus = x > 20.f ? x : std::log(1.f + std::exp(x));  // ggml's op_softplus
  return {sigmoid_gate(beta), std::exp(softplus * a)};
}

namespace detail {
void delta_columns_ref(const DeltaStep& s, int64_t j0, int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    float sk = 0;
    for (int64_t i = 0; i < s.n; ++i) sk += (s.state[i * s.n + j] *= s.decay) * s.k[i];
    const float err = (s.v[j] - sk) * s.beta;
    float o = 0;
    for (int64_t i = 0; i < s.n; ++i) o += (s.state[i * s.n + j] += s.k[i] * err) * s.q[i];
    s.out[j] = o * s.scale;
  }
}
}  // namespace detail

void delta_step_ref(const DeltaStep& s) { detail::delta_columns_ref(s, 0, s.n); }

void delta_rule(float* state, int64_t head_dim, int64_t n_tokens, const float* q, const float* k, const float* v,
                int64_t qk_stride, int64_t v_stride, const DeltaGates* gates, int64_t gate_stride, float* out) {
  const auto step = ops_kernels().delta_step;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const DeltaGates g = gates[t * gate_stride];
    step({state, q + t * qk_stride, k + t * qk_stride, v + t * v_stride, out + t * v_stride, g.beta, g.decay, scale,
          head_dim});
  }
}

}  // namespace weft::kernels
