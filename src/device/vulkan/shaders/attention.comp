#version 450
// Causal attention of one layer's local heads over the KV cache, one workgroup per (q head, token):
// keys in chunks of 64 (a score each thread), an online softmax across chunks, and each thread
// accumulating the output dims tid, tid + 64, ... (head_dim <= MAX_HD). Token t sees the keys of its
// slot at positions 0..pos[t] (this step's already stored by kv_store.comp); with a sliding window,
// the last `window` of them. A head's sink (gpt-oss), where it has one, is one more logit in its
// softmax's denominator only: the online softmax starts at it (max the sink, sum exp(0)).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
#if defined(KV_F16)
layout(std430, binding = 1) readonly buffer K { uint16_t kc[]; };
layout(std430, binding = 2) readonly buffer V { uint16_t vc[]; };
float kval(uint i) { return f16_bits_to_f32(uint(kc[i])); }
float vval(uint i) { return f16_bits_to_f32(uint(vc[i])); }
#else
layout(std430, binding = 1) readonly buffer K { float kc[]; };
layout(std430, binding = 2) readonly buffer V { float vc[]; };
float kval(uint i) { return kc[i]; }
float vval(uint i) { return vc[i]; }
#endif
layout(std430, binding = 3) readonly buffer T { int tok[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };
layout(std430, binding = 5) readonly buffer B { int base[]; };  // windowed: row r holds position base[slot] + r
layout(std430, binding = 6) readonly buffer S { float sinks[]; };  // per local q head, where has_sinks
layout(push_constant) uniform P {
  uint n_q, n_kv, head_dim, n_ctx, q_head_begin, kv_begin, group;
  float scale;
  uint window;  // 0: none
  uint windowed;
  uint has_sinks;
} p;
#define MAX_HD 576  // DeepSeek's latent rows (Gemma 4's global heads: 512); vk_graph_runner.cpp's kMaxHeadDim
#define SLOTS (MAX_HD / 64)
shared float qs[MAX_HD];
shared float ps[64];

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  const uint hd = p.head_dim;
  const uint kv = (p.q_head_begin + h) / p.group - p.kv_begin;
  const uint slot = uint(tok[2 * t]), n_valid = uint(tok[2 * t + 1]) + 1;
  const uint first = p.window > 0 && n_valid > p.window ? n_valid - p.window : 0;
  const uint qbase = (t * p.n_q + h) * hd;
  for (uint e = tid; e < hd; e += 64) qs[e] = q[qbase + e];
  barrier();
  // Key j's row: j - base (a whole run of the window, never wrapping).
  const uint cache = (slot * p.n_kv + kv) * p.n_ctx * hd - (p.windowed != 0 ? uint(base[slot]) * hd : 0);
  float m = p.has_sinks != 0 ? sinks[h] : -1.0 / 0.0, l = p.has_sinks != 0 ? 1.0 : 0.0;
  float acc[SLOTS];
  for (uint k = 0; k < SLOTS; ++k) acc[k] = 0.0;
  for (uint j0 = first; j0 < n_valid; j0 += 64) {
    const uint j = j0 + tid;
    float s = -1.0 / 0.0;
    if (j < n_valid) {
      s = 0.0;
      for (uint e = 0; e < hd; ++e) s += qs[e] * kval(cache + j * hd + e);
      s *= p.scale;
    }
    ps[tid] = s;
    barrier();
    float mc = m;
    for (uint i = 0; i < 64; ++i) mc = max(mc, ps[i]);
    barrier();
    ps[tid] = j < n_valid ? exp(s - mc) : 0.0;
    barrier();
    const float corr = exp(m - mc);
    float sum = 0.0;
    for (uint i = 0; i < 64; ++i) sum += ps[i];
    l = l * corr + sum;
    const uint n = min(64u, n_valid - j0);
    for (uint k = 0; k < SLOTS; ++k) {
      const uint e = tid + 64 * k;
      if (e >= hd) break;
      float a = acc[k] * corr;
      for (uint i = 0; i < n; ++i) a += ps[i] * vval(cache + (j0 + i) * hd + e);
      acc[k] = a;
    }
    m = mc;
    barrier();
  }
  for (uint k = 0; k < SLOTS; ++k) {
    const uint e = tid + 64 * k;
    if (e < hd) o[qbase + e] = acc[k] / l;
  }
}
