#version 450
// Activations in the format a weight type's dot product reads (the CPU's vec_dot_type), one thread
// per block: ACT 0 = Q8_0 (blocks of 32, d as f16), 1 = Q8_1 (also s = d * sum(q) as f16),
// 2 = Q8_K (blocks of 256, d as f32, sums of each 16 in s). Rounded as the CPU rounds, so the
// integer dot products that follow are the CPU's exactly.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Q { int8_t q[]; };
layout(std430, binding = 2) writeonly buffer D { float d[]; };
layout(std430, binding = 3) writeonly buffer S { float s[]; };
layout(push_constant) uniform P { uint n_values, act; } p;
float to_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }
void main() {
  const uint qk = p.act == 2 ? 256 : 32;
  const uint blk = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64;
  if (blk * qk >= p.n_values) return;
  const uint base = blk * qk;
  if (p.act == 2) {
    // As the CPU's quantize_row_q8_K: symmetric, iscale = 127 / amax, round half to even.
    float amax = 0.0;
    for (uint j = 0; j < 256; ++j) amax = max(amax, abs(x[base + j]));
    if (amax == 0.0) {
      d[blk] = 0.0;
      for (uint j = 0; j < 256; ++j) q[base + j] = int8_t(0);
      for (uint g = 0; g < 16; ++g) s[blk * 16 + g] = 0.0;
      return;
    }
    const float iscale = 127.0 / amax;
    for (uint g = 0; g < 16; ++g) {
      int sum = 0;
      for (uint j = 0; j < 16; ++j) {
        const int v = int(clamp(roundEven(iscale * x[base + g * 16 + j]), -127.0, 127.0));
        q[base + g * 16 + j] = int8_t(v);
        sum += v;
      }
      s[blk * 16 + g] = float(sum);
    }
    d[blk] = 1.0 / iscale;
    return;
  }
  float amax = 0.0;
  for (uint j = 0; j < 32; ++j) amax = max(amax, abs(x[base + j]));
  const float dv = amax / 127.0, id = dv != 0.0 ? 1.0 / dv : 0.0;
  int sum = 0;
  for (uint j = 0; j < 32; ++j) {
    const int v = int(round_away(x[base + j] * id));
    q[base + j] = int8_t(v);
    sum += v;
  }
  d[blk] = to_f16(dv);
  if (p.act == 1) s[blk] = to_f16(float(sum) * dv);
}
