#version 450
// Writes the step's K or V rows ([n_tokens, n_kv, head_dim] f32) into a cache laid out
// [slot][kv head][n_ctx rows][head_dim], at each token's slot and position (tok: slot, pos pairs);
// a sliding window's cache (windowed) holds position base[slot] + r in row r.
// KV_F16: the cache holds IEEE halves (rounded to nearest even), else f32.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
#if defined(KV_F16)
layout(std430, binding = 1) writeonly buffer C { uint16_t c[]; };
#else
layout(std430, binding = 1) writeonly buffer C { float c[]; };
#endif
layout(std430, binding = 2) readonly buffer T { int tok[]; };
layout(std430, binding = 3) readonly buffer B { int base[]; };
layout(push_constant) uniform P { uint n_tokens, n_kv, head_dim, n_ctx, windowed; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  const uint row = p.n_kv * p.head_dim;
  if (i >= p.n_tokens * row) return;
  const uint t = i / row, h = (i % row) / p.head_dim, e = i % p.head_dim;
  const uint slot = uint(tok[2 * t]), pos = uint(tok[2 * t + 1]) - (p.windowed != 0 ? uint(base[slot]) : 0);
  const uint dst = ((slot * p.n_kv + h) * p.n_ctx + pos) * p.head_dim + e;
#if defined(KV_F16)
  c[dst] = uint16_t(f32_to_f16_bits(x[i]));
#else
  c[dst] = x[i];
#endif
}
