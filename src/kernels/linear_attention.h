// Gated DeltaNet's loops (Qwen 3.5's linear attention), as llama.cpp's CPU backend computes them
// (ggml_ssm_conv, ggml_l2_norm, ggml_gated_delta_net): for one sequence's tokens at a time, since
// each token reads the state the one before it left.
#pragma once

#include "kernels/ops.h"

#include <cstdint>
#include <vector>

namespace weft::kernels {

// y[t, c] = silu(sum_j taps[j, c] x[t - kernel + 1 + j, c]) over n features c (tap kernel - 1 the
// current input's), rows of x, y, taps and state `stride` floats apart. Inputs before the first
// token come from `state` (kernel - 1 rows, the oldest first), which is left holding the last
// kernel - 1 inputs. y may not be x.
void causal_conv_silu(const float* x, int64_t n_tokens, int64_t n, int64_t stride, const float* taps, int64_t kernel,
                      float* state, float* y);
// ssm_conv1d's rows (a row of `kernel` taps per feature, n features) as causal_conv_silu reads them:
// a row of n features per tap.
std::vector<float> conv_taps_by_tap(const std::vector<float>& per_feature, int64_t n, int64_t kernel);

// x[h] /= max(|x[h]|, eps) for each of n_heads heads of head_dim.
void l2_norm_heads(float* x, int64_t n_heads, int64_t head_dim, float eps);

// A value head's gates for one token: its learning rate sigmoid(beta) and its state's decay
// exp(softplus(alpha + dt) * a) (a < 0: ssm_a = -exp(A_log)), with that decay's log.
struct DeltaGates {
  float beta, decay, log_decay;
};
DeltaGates delta_gates(float beta, float alpha, float a, float dt);

// One value head over n_tokens tokens: DeltaStep (ops.h) token after token, q/k/v/out rows `stride`
// floats apart (q and k L2-normed), gates `gate_stride` apart, out scaled by 1/sqrt(head_dim).
// `chunked`: runs of at least kDeltaChunkMin tokens go kDeltaChunk at a time through DeltaChunk
// (the same sums regrouped: equal within float rounding, not bit for bit), the rest token by token.
inline constexpr int64_t kDeltaChunkMin = 16;
void delta_rule(float* state, int64_t head_dim, int64_t n_tokens, const float* q, const float* k, const float* v,
                int64_t qk_stride, int64_t v_stride, const DeltaGates* gates, int64_t gate_stride, float* out,
                bool chunked = false);

}  // namespace weft::kernels
