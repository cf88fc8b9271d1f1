#version 450
// The elementwise ops, one shader chosen by OP: 0 add (y = a + b), 1 swiglu (y = silu(a) * b),
// 2 sigmoid scale (y[t, i] = a[t, i] * sigmoid(b[t]), b one value per row of `width`),
// 3 bias (y[t, i] = a[t, i] + b[i]), 4 gpt-oss's clamped swiglu (kernels::swiglu_oai: g = min(a,
// limit), u = clamp(b, -limit, limit), y = g * sigmoid(alpha g) * (u + 1)), 5 scale (y = a * b[0]),
// 6 sigmoid gate (y = a * sigmoid(b), a gate a value: Qwen 3.5's attention output). y may be a.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n, width, op;
  float alpha, limit;  // op 4 only
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256;
  if (i >= p.n) return;
  const float v = a[i];
  if (p.op == 0) y[i] = v + b[i];
  else if (p.op == 1) y[i] = v / (1.0 + exp(-v)) * b[i];
  else if (p.op == 2) y[i] = v * (1.0 / (1.0 + exp(-b[i / p.width])));
  else if (p.op == 3) y[i] = v + b[i % p.width];
  else if (p.op == 5) y[i] = v * b[0];
  else if (p.op == 6) y[i] = v * (1.0 / (1.0 + exp(-b[i])));
  else {
    const float g = min(v, p.limit);
    y[i] = g / (1.0 + exp(p.alpha * -g)) * (clamp(b[i], -p.limit, p.limit) + 1.0);
  }
}
