// Shared by every shader: the storage types weft's buffers hold and the f16/bf16 conversions.
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

float f16_bits_to_f32(uint bits) { return unpackHalf2x16(bits).x; }
float bf16_bits_to_f32(uint bits) { return uintBitsToFloat(bits << 16); }
// Round half away from zero, as C's round() (quantized activations must match the CPU's).
float round_away(float v) { return sign(v) * floor(abs(v) + 0.5); }
