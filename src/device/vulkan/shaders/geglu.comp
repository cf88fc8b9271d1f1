#version 450
// y = gelu(gate) * up as the CPU computes it (kernels::geglu): the gate rounded to the nearest half
// (as the f16 KV cache rounds), its GELU looked up in the CPU's own table of every half; 0 below
// -10, the gate itself from 10 on.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer G { float gate[]; };
layout(std430, binding = 1) readonly buffer U { float up[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer T { float table[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.n) return;
  const float x = gate[i];
  const float g = x <= -10.0 ? 0.0 : x >= 10.0 ? x : table[f32_to_f16_bits(x)];
  y[i] = g * up[i];
}
