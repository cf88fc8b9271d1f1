#version 450
// y[r, i] = x[r, i] / sqrt(mean(x[r]^2) + eps) * w[i % n], over rows of n values: a token's whole
// width (RMSNorm) or one head (head norm, w of head_dim). One workgroup per row, of 256 threads: a
// decode step's rows are one or a few, so a row's loads must be spread wide (64 threads left an
// H200 reading 16 values each in turn, ~34 us a norm). Squares summed per subgroup, then the
// subgroups' sums in order.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n, n_rows; float eps; } p;
shared float partial[256];  // one per subgroup (subgroups of 1 at the least)
void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x, tid = gl_LocalInvocationID.x;
  if (row >= p.n_rows) return;
  const uint base = row * p.n;
  float s = 0.0;
  for (uint i = tid; i < p.n; i += 256) s += x[base + i] * x[base + i];
  s = subgroupAdd(s);
  if (subgroupElect()) partial[gl_SubgroupID] = s;
  barrier();
  float total = 0.0;
  for (uint g = 0; g < gl_NumSubgroups; ++g) total += partial[g];
  const float scale = 1.0 / sqrt(total / float(p.n) + p.eps);
  for (uint i = tid; i < p.n; i += 256) y[base + i] = x[base + i] * scale * w[i];
}
