#version 450
// Gated DeltaNet's causal conv (kernels::causal_conv_silu): y[t, c] = silu(sum_j taps[j, c] x[t - K + 1
// + j, c]) over each sequence's tokens in order, the inputs before its first token from the slot's
// state (its last K - 1 inputs, the oldest first), which is left holding the last K - 1. A thread per
// (feature, sequence); a sequence that starts over (position 0) starts from zeros.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };     // [tokens][width]
layout(std430, binding = 1) readonly buffer Taps { float taps[]; };  // [K][width]
layout(std430, binding = 2) buffer State { float state[]; };     // [slots][K - 1][width]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer Seqs { int seqs[]; };  // per sequence: first token, tokens, slot, restart
layout(push_constant) uniform P { uint width, kernel, n_seqs; } p;
void main() {
  const uint c = gl_GlobalInvocationID.x, s = gl_GlobalInvocationID.y;
  if (c >= p.width || s >= p.n_seqs) return;
  const uint t0 = uint(seqs[4 * s]), n = uint(seqs[4 * s + 1]), slot = uint(seqs[4 * s + 2]);
  const bool restart = seqs[4 * s + 3] != 0;
  const uint held = p.kernel - 1, base = slot * held * p.width + c;
  float win[16];  // the last K inputs, the current one last (kernel <= 16: the model refuses more)
  for (uint j = 0; j < held; ++j) win[j] = restart ? 0.0 : state[base + j * p.width];
  for (uint t = 0; t < n; ++t) {
    win[held] = x[(t0 + t) * p.width + c];
    float sum = 0.0;
    for (uint j = 0; j <= held; ++j) sum += win[j] * taps[j * p.width + c];
    y[(t0 + t) * p.width + c] = sum / (1.0 + exp(-sum));
    for (uint j = 0; j < held; ++j) win[j] = win[j + 1];
  }
  for (uint j = 0; j < held; ++j) state[base + j * p.width] = win[j];
}
