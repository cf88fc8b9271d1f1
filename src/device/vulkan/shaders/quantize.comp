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
// a / b rounded to nearest even, as the CPU divides. Vulkan lets OpFDiv be 2.5 ULP off, and lavapipe's
// is an ulp off in most Q8_K blocks (tests/device/vulkan/vk_blocks_test.cpp): a scale an ulp from
// the CPU's changes every product of its block, and a value at a rounding boundary its q. So the
// mantissas are divided as integers: 25 quotient bits (the last a guard bit) and a sticky
// remainder. Positive normal a, b and quotient only (a block's amax, 127, 1); anything else takes
// the plain division.
float div_rn(float a, float b) {
  const uint ua = floatBitsToUint(a), ub = floatBitsToUint(b), ea = ua >> 23, eb = ub >> 23;  // sign 0: exponents
  if (ea == 0 || ea >= 255 || eb == 0 || eb >= 255) return a / b;  // negative, zero, subnormal, inf, nan
  int e = int(ea) - int(eb);
  uint ma = (ua & 0x7fffffu) | 0x800000u, mb = (ub & 0x7fffffu) | 0x800000u;
  if (ma < mb) {  // ma / mb in [1, 2) from here
    ma <<= 1;
    e -= 1;
  }
  if (e + 127 <= 0 || e + 127 >= 255) return a / b;
  uint q = 0, r = ma;  // r < 2 mb < 2^25 throughout
  for (int i = 0; i < 25; ++i) {
    q <<= 1;
    if (r >= mb) {
      r -= mb;
      q |= 1u;
    }
    r <<= 1;
  }
  const bool up = (q & 1u) != 0 && (r != 0 || (q & 2u) != 0);
  q = (q >> 1) + (up ? 1u : 0u);  // 2^24 after a carry: the next binade, mantissa 0
  return uintBitsToFloat((uint(e + 127) << 23) + (q - 0x800000u));
}
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
    const float iscale = div_rn(127.0, amax);
    for (uint g = 0; g < 16; ++g) {
      int sum = 0;
      for (uint j = 0; j < 16; ++j) {
        const int v = int(clamp(roundEven(iscale * x[base + g * 16 + j]), -127.0, 127.0));
        q[base + g * 16 + j] = int8_t(v);
        sum += v;
      }
      s[blk * 16 + g] = float(sum);
    }
    d[blk] = div_rn(1.0, iscale);
    return;
  }
  float amax = 0.0;
  for (uint j = 0; j < 32; ++j) amax = max(amax, abs(x[base + j]));
  const float dv = div_rn(amax, 127.0), id = dv != 0.0 ? div_rn(1.0, dv) : 0.0;
  int sum = 0;
  for (uint j = 0; j < 32; ++j) {
    const int v = int(round_away(x[base + j] * id));
    q[base + j] = int8_t(v);
    sum += v;
  }
  d[blk] = round_to_f16(dv);
  if (p.act == 1) s[blk] = round_to_f16(float(sum) * dv);
}
