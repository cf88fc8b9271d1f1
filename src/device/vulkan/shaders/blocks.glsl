// The weight types' blocks, as ggml lays them out (rows packed, nb = cols / QK blocks each), and the
// dot of one block with the activations of input row x_row, as the CPU computes it: float types
// against f32 activations, integer types as an exact integer sum times the blocks' scales.
// Defines TYPE_* (one per shader variant); expects the activation buffers x, aq, ad, as_ and p.cols.

#if defined(TYPE_F32)
#define QK 1
layout(std430, binding = 0) readonly buffer W { float w[]; };
float block_dot(uint row, uint b, uint xr) { return w[row * p.cols + b] * x[xr * p.cols + b]; }

#elif defined(TYPE_F16) || defined(TYPE_BF16)
#define QK 1
layout(std430, binding = 0) readonly buffer W { uint16_t w[]; };
float block_dot(uint row, uint b, uint xr) {
  const uint bits = uint(w[row * p.cols + b]);
#if defined(TYPE_F16)
  return f16_bits_to_f32(bits) * x[xr * p.cols + b];
#else
  return bf16_bits_to_f32(bits) * x[xr * p.cols + b];
#endif
}

#else
layout(std430, binding = 0) readonly buffer W { uint8_t w[]; };
uint wb(uint o) { return uint(w[o]); }
uint wu16(uint o) { return wb(o) | (wb(o + 1) << 8); }
uint wu32(uint o) { return wu16(o) | (wu16(o + 2) << 16); }
float wf16(uint o) { return f16_bits_to_f32(wu16(o)); }
int a8(uint i) { return int(aq[i]); }

#if defined(TYPE_Q4_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_0) || defined(TYPE_Q5_1) || defined(TYPE_Q8_0)
#define QK 32
#if defined(TYPE_Q4_0)
#define BLOCK_BYTES 18
#elif defined(TYPE_Q4_1)
#define BLOCK_BYTES 20
#elif defined(TYPE_Q5_0)
#define BLOCK_BYTES 22
#elif defined(TYPE_Q5_1)
#define BLOCK_BYTES 24
#else
#define BLOCK_BYTES 34
#endif
float block_dot(uint row, uint b, uint xr) {
  const uint nb = p.cols / QK;
  const uint o = (row * nb + b) * BLOCK_BYTES;  // the weight block
  const uint ab = xr * nb + b;                  // the activation block
  const uint a0 = ab * QK;
  int sumi = 0;
#if defined(TYPE_Q8_0)
  for (uint j = 0; j < 32; ++j) sumi += int(int8_t(w[o + 2 + j])) * a8(a0 + j);
  return float(sumi) * (wf16(o) * ad[ab]);
#elif defined(TYPE_Q4_0) || defined(TYPE_Q4_1)
  const uint qs = o + (BLOCK_BYTES - 16);
  for (uint j = 0; j < 16; ++j) {
    const uint v = wb(qs + j);
#if defined(TYPE_Q4_0)
    sumi += (int(v & 15) - 8) * a8(a0 + j) + (int(v >> 4) - 8) * a8(a0 + j + 16);
#else
    sumi += int(v & 15) * a8(a0 + j) + int(v >> 4) * a8(a0 + j + 16);
#endif
  }
#else  // Q5_0, Q5_1: bit j of qh is bit 4 of element j
  const uint qh = wu32(o + (BLOCK_BYTES - 20)), qs = o + (BLOCK_BYTES - 16);
  for (uint j = 0; j < 16; ++j) {
    const uint v = wb(qs + j);
    int lo = int((v & 15) | (((qh >> j) & 1) << 4)), hi = int((v >> 4) | (((qh >> (j + 16)) & 1) << 4));
#if defined(TYPE_Q5_0)
    lo -= 16;
    hi -= 16;
#endif
    sumi += lo * a8(a0 + j) + hi * a8(a0 + j + 16);
  }
#endif
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
  return float(sumi) * (wf16(o) * ad[ab]) + wf16(o + 2) * as_[ab];
#elif !defined(TYPE_Q8_0)
  return float(sumi) * (wf16(o) * ad[ab]);
#endif
}
#endif  // legacy types

#endif  // integer types

#ifndef QK
#error "blocks.glsl: no TYPE_* defined, or a type it does not know"
#endif
