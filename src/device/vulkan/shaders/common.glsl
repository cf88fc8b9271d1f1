// Shared by every shader: the storage types weft's buffers hold and the f16/bf16 conversions.
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

float f16_bits_to_f32(uint bits) { return unpackHalf2x16(bits).x; }
// f32 to IEEE half bits, rounded to nearest even as the CPU's conversion rounds. In integers because
// packHalf2x16's rounding is the implementation's, and NVIDIA's compiler folds
// unpackHalf2x16(packHalf2x16(v)) to v (the activations' scales came back unrounded on an H200).
uint f32_to_f16_bits(float v) {
  const uint u = floatBitsToUint(v), sgn = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sgn | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);  // inf, nan
  if (a >= 0x477ff000u) return sgn | 0x7c00u;  // 65520 and up round to inf
  if (a >= 0x38800000u) return sgn | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13);  // normal
  if (a < 0x33000000u) return sgn;  // under 2^-25: zero
  const uint shift = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u, rest = m & ((1u << shift) - 1u),
             half_ = 1u << (shift - 1u);
  uint q = m >> shift;  // subnormal: units of 2^-24
  if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
  return sgn | q;
}
float round_to_f16(float v) { return f16_bits_to_f32(f32_to_f16_bits(v)); }
float bf16_bits_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }
// Round half away from zero, as C's round() (quantized activations must match the CPU's).
float round_away(float v) { return sign(v) * floor(abs(v) + 0.5); }
