#version 450
// y[r, i] = x[r, i] / sqrt(mean(x[r]^2) + eps) * w[i % n], over rows of n values: a token's whole
// width (RMSNorm) or one head (head norm, w of head_dim). One workgroup per row.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n, n_rows; float eps; } p;
shared float partial[64];
void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, tid = gl_LocalInvocationID.x;
  if (row >= p.n_rows) return;
  const uint base = row * p.n;
  float s = 0.0;
  for (uint i = tid; i < p.n; i += 64) s += x[base + i] * x[base + i];
  partial[tid] = s;
  barrier();
  for (uint h = 32; h > 0; h >>= 1) {
    if (tid < h) partial[tid] += partial[tid + h];
    barrier();
  }
  const float scale = 1.0 / sqrt(partial[0] / float(p.n) + p.eps);
  for (uint i = tid; i < p.n; i += 64) y[base + i] = x[base + i] * scale * w[i];
}
