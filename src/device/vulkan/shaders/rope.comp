#version 450
// Rotary embedding in place: x is [n_tokens, n_heads, head_dim], each head rotated on its features
// offset .. offset + n_rot (MLA's queries: the last n_rot); cs holds each token's cos then sin of
// every pair's angle ([n_tokens, n_rot]: computed on the host in double, as the CPU does).
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer CS { float cs[]; };
layout(push_constant) uniform P { uint n_tokens, n_heads, head_dim, n_rot, neox, offset; } p;
void main() {
  const uint half_rot = p.n_rot / 2;
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64;
  if (id >= p.n_tokens * p.n_heads * half_rot) return;
  const uint i = id % half_rot, th = id / half_rot, t = th / p.n_heads;
  const uint base = th * p.head_dim + p.offset;
  const uint a = base + (p.neox != 0 ? i : 2 * i), b = base + (p.neox != 0 ? i + half_rot : 2 * i + 1);
  const float c = cs[t * p.n_rot + i], s = cs[t * p.n_rot + half_rot + i];
  const float x0 = x[a], x1 = x[b];
  x[a] = x0 * c - x1 * s;
  x[b] = x0 * s + x1 * c;
}
