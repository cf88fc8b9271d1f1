#version 450
// Gated DeltaNet's recurrence (kernels::delta_rule with delta_gates and l2_norm_heads), one
// workgroup per (value head, sequence), its tokens in order. Each token: q and k of the head's key
// head L2-normed into shared memory, the gates beta = sigmoid(b) and decay = exp(softplus(alpha + dt)
// a), then each thread's columns j of the state S (n x n, row i a key feature, in the slot's state):
//   S[., j] *= decay;  err = (v[j] - S[., j] . k) beta;  S[., j] += k err;  out[j] = S[., j] . q / sqrt(n)
// A sequence that starts over (position 0) starts from a zero state.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };       // [tokens][key heads x n]
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };       // [tokens][value heads x n]
layout(std430, binding = 3) readonly buffer Beta { float beta[]; };  // [tokens][value heads]
layout(std430, binding = 4) readonly buffer Alpha { float alpha[]; };
layout(std430, binding = 5) readonly buffer Gate { float gate[]; };  // [value heads] of ssm_a, then of ssm_dt
layout(std430, binding = 6) buffer State { float state[]; };         // [slots][value heads][n][n]
layout(std430, binding = 7) writeonly buffer Y { float y[]; };      // [tokens][value heads x n]
layout(std430, binding = 8) readonly buffer Seqs { int seqs[]; };   // per sequence: first token, tokens, slot, restart
layout(push_constant) uniform P {
  uint n, k_heads, v_heads, grouped, n_seqs;
  float eps;
} p;
shared float qs[1024], ks[1024];
shared float partial[2][128];
void main() {
  const uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  if (h >= p.v_heads || s >= p.n_seqs) return;
  const uint t0 = uint(seqs[4 * s]), n_tok = uint(seqs[4 * s + 1]), slot = uint(seqs[4 * s + 2]);
  const uint n = p.n, kh = p.grouped != 0 ? h / (p.v_heads / p.k_heads) : h % p.k_heads;
  const uint kw = p.k_heads * n, vw = p.v_heads * n, sbase = (slot * p.v_heads + h) * n * n;
  if (seqs[4 * s + 3] != 0)
    for (uint e = tid; e < n * n; e += 128) state[sbase + e] = 0.0;
  const float a = gate[h], dt = gate[p.v_heads + h], scale = 1.0 / sqrt(float(n));
  for (uint t = 0; t < n_tok; ++t) {
    const uint row = t0 + t;
    float sq = 0.0, sk = 0.0;
    for (uint i = tid; i < n; i += 128) {
      const float qi = q[row * kw + kh * n + i], ki = k[row * kw + kh * n + i];
      qs[i] = qi;
      ks[i] = ki;
      sq += qi * qi;
      sk += ki * ki;
    }
    sq = subgroupAdd(sq);
    sk = subgroupAdd(sk);
    if (subgroupElect()) {
      partial[0][gl_SubgroupID] = sq;
      partial[1][gl_SubgroupID] = sk;
    }
    barrier();
    float tq = 0.0, tk = 0.0;
    for (uint g = 0; g < gl_NumSubgroups; ++g) {
      tq += partial[0][g];
      tk += partial[1][g];
    }
    const float nq = 1.0 / max(sqrt(tq), p.eps), nk = 1.0 / max(sqrt(tk), p.eps);
    const float x = alpha[row * p.v_heads + h] + dt, softplus = x > 20.0 ? x : log(1.0 + exp(x));
    const float decay = exp(softplus * a), rate = 1.0 / (1.0 + exp(-beta[row * p.v_heads + h]));
    for (uint j = tid; j < n; j += 128) {
      float dot_k = 0.0;
      for (uint i = 0; i < n; ++i) {
        const float e = state[sbase + i * n + j] * decay;
        state[sbase + i * n + j] = e;
        dot_k += e * (ks[i] * nk);
      }
      const float err = (v[row * vw + h * n + j] - dot_k) * rate;
      float o = 0.0;
      for (uint i = 0; i < n; ++i) {
        const float e = state[sbase + i * n + j] + ks[i] * nk * err;
        state[sbase + i * n + j] = e;
        o += e * (qs[i] * nq);
      }
      y[row * vw + h * n + j] = o * scale;
    }
    barrier();  // qs, ks and partial are the next token's
  }
}
