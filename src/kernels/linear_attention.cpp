#include "kernels/linear_attention.h"

#include "kernels/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

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

std::vector<float> conv_taps_by_tap(const std::vector<float>& per_feature, int64_t n, int64_t kernel) {
  std::vector<float> rows(per_feature.size());
  for (int64_t c = 0; c < n; ++c)
    for (int64_t j = 0; j < kernel; ++j) rows[j * n + c] = per_feature[c * kernel + j];
  return rows;
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
  return {sigmoid_gate(beta), std::exp(softplus * a), softplus * a};
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

namespace detail {
DeltaChunkWork delta_chunk_prepare(const DeltaChunk& c) {
  const int64_t n = c.n, m = c.n_tokens, C = kDeltaChunk;
  float* f = c.work;
  auto take = [&](int64_t count) { return std::exchange(f, f + count); };
  DeltaChunkWork w;
  w.u = take(C * n);
  w.p = take(C * n);
  w.q = take(C * n);
  w.k = take(C * n);
  w.k_t = take(n * C);
  w.kk = take(C * C);
  w.qk = take(C * C);
  w.log_g = take(C);
  float acc = 0;
  for (int64_t t = 0; t < m; ++t) {
    w.log_g[t] = acc += c.log_decay[t];
    std::memcpy(w.q + t * n, c.q + t * c.qk_stride, static_cast<size_t>(n) * sizeof(float));
    std::memcpy(w.k + t * n, c.k + t * c.qk_stride, static_cast<size_t>(n) * sizeof(float));
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < C; ++s) w.k_t[i * C + s] = s < m ? w.k[s * n + i] : 0.f;
  return w;
}

float delta_decay(float log_ratio) { return log_ratio < -80.f ? 0.f : std::exp(log_ratio); }

void delta_chunk_coefficients(const DeltaChunk& c, const DeltaChunkWork& w) {
  const int64_t m = c.n_tokens, C = kDeltaChunk;
  // Coefficients below 1e-30 (of products with corrections of order 1) are dropped as subnormal
  // factors would be (delta_decay).
  auto tiny = [](float x) { return std::abs(x) < 1e-30f ? 0.f : x; };
  for (int64_t t = 0; t < m; ++t)
    for (int64_t s = 0; s <= t; ++s) {
      const float ratio = delta_decay(w.log_g[t] - w.log_g[s]);  // g_t / g_s <= 1
      w.kk[t * C + s] = tiny(w.kk[t * C + s] * c.beta[t] * ratio);
      w.qk[t * C + s] = tiny(w.qk[t * C + s] * ratio);
    }
  // The state's update: token s's k scaled by g_m / g_s.
  for (int64_t s = 0; s < m; ++s) {
    const float ratio = delta_decay(w.log_g[m - 1] - w.log_g[s]);
    for (int64_t i = 0; i < c.n; ++i) w.k_t[i * C + s] = tiny(ratio * w.k_t[i * C + s]);
  }
}
}  // namespace detail

void delta_chunk_ref(const DeltaChunk& c) {
  const int64_t n = c.n, m = c.n_tokens, C = kDeltaChunk;
  const detail::DeltaChunkWork w = detail::delta_chunk_prepare(c);
  // rows of y (width wy) = rows of x (width k) times M (k x wy)
  auto product = [](const float* x, int64_t rows, int64_t k, const float* M, int64_t wy, float* y) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < wy; ++j) {
        float sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += x[r * k + i] * M[i * wy + j];
        y[r * wy + j] = sum;
      }
  };
  product(w.k, m, n, c.state, n, w.u);  // S_0^T k_t
  product(w.q, m, n, c.state, n, w.p);  // S_0^T q_t
  product(w.k, m, n, w.k_t, C, w.kk);   // k_t . k_s
  product(w.q, m, n, w.k_t, C, w.qk);   // q_t . k_s
  detail::delta_chunk_coefficients(c, w);
  for (int64_t t = 0; t < m; ++t) {  // the corrections, in order: u_t reads every u_s before it
    const float g = detail::delta_decay(w.log_g[t]);
    float* u = w.u + t * n;
    const float* v = c.v + t * c.v_stride;
    for (int64_t j = 0; j < n; ++j) {
      float x = c.beta[t] * (v[j] - g * u[j]);
      for (int64_t s = 0; s < t; ++s) x -= w.kk[t * C + s] * w.u[s * n + j];
      u[j] = x;
    }
    float* out = c.out + t * c.v_stride;
    for (int64_t j = 0; j < n; ++j) {
      float o = g * w.p[t * n + j];
      for (int64_t s = 0; s <= t; ++s) o += w.qk[t * C + s] * w.u[s * n + j];
      out[j] = o * c.scale;
    }
  }
  const float g = detail::delta_decay(w.log_g[m - 1]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float x = g * c.state[i * n + j];
      for (int64_t s = 0; s < m; ++s) x += w.k_t[i * C + s] * w.u[s * n + j];
      c.state[i * n + j] = x;
    }
}

void delta_rule(float* state, int64_t head_dim, int64_t n_tokens, const float* q, const float* k, const float* v,
                int64_t qk_stride, int64_t v_stride, const DeltaGates* gates, int64_t gate_stride, float* out,
                bool chunked) {
  const auto step = ops_kernels().delta_step;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  int64_t t = 0;
  if (chunked && n_tokens >= kDeltaChunkMin) {
    thread_local std::vector<float> work;
    work.resize(static_cast<size_t>(delta_chunk_work(head_dim)));
    float beta[kDeltaChunk], log_decay[kDeltaChunk];
    const auto chunk = ops_kernels().delta_chunk;
    for (; n_tokens - t >= kDeltaChunkMin; t += kDeltaChunk) {
      const int64_t m = std::min(kDeltaChunk, n_tokens - t);
      for (int64_t i = 0; i < m; ++i) {
        beta[i] = gates[(t + i) * gate_stride].beta;
        log_decay[i] = gates[(t + i) * gate_stride].log_decay;
      }
      chunk({state, q + t * qk_stride, k + t * qk_stride, v + t * v_stride, out + t * v_stride, qk_stride, v_stride,
             beta, log_decay, scale, head_dim, m, work.data()});
      if (m < kDeltaChunk) return;
    }
  }
  for (; t < n_tokens; ++t) {
    const DeltaGates g = gates[t * gate_stride];
    step({state, q + t * qk_stride, k + t * qk_stride, v + t * v_stride, out + t * v_stride, g.beta, g.decay, scale,
          head_dim});
  }
}

}  // namespace weft::kernels
