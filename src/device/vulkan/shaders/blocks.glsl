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
// Wider views of the same buffers, where a block's fields are aligned for them: fewer loads.
layout(std430, binding = 0) readonly buffer W16 { uint16_t w16[]; };
layout(std430, binding = 0) readonly buffer W32 { uint w32[]; };
layout(std430, binding = 2) readonly buffer AQ32 { int aq32[]; };
uint w16u(uint i) { return uint(w16[i]); }
uint w32at(uint i) { return w16u(i) | (w16u(i + 1) << 16); }  // 4 bytes from 16-bit word i
ivec4 a4(uint i) { return ivec4(unpack8(aq32[i])); }           // activations 4i .. 4i+3
int hsum(ivec4 v) { return v.x + v.y + v.z + v.w; }
// Bits shift .. shift + width - 1 of each byte of u.
ivec4 bytes_bits(uint u, uint shift, uint mask) {
  return ivec4((u >> shift) & mask, (u >> (shift + 8)) & mask, (u >> (shift + 16)) & mask, (u >> (shift + 24)) & mask);
}
ivec4 nibbles(uint u, uint shift) { return bytes_bits(u, shift, 15); }

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
// Rows stored split (vk_weight_rows.h): the row's block headers (d, Q4_1/Q5_1's m, Q5's qh: HB
// bytes a block, whole 16-bit words) first, then its quants from a 16-byte boundary, QS bytes a
// block: one or two 16-byte loads a block, and the activations' 32 bytes two more.
#if defined(TYPE_Q8_0)
#define QS 32
#else
#define QS 16
#endif
#define HB (BLOCK_BYTES - QS)
layout(std430, binding = 0) readonly buffer W128 { uvec4 w128[]; };
layout(std430, binding = 2) readonly buffer AQ128 { ivec4 aq128[]; };
// The sum of the products of two words' four signed bytes: one instruction where the device has
// the integer dot product (INT_DOT, the matmul_*_dot variants), four products otherwise.
#if defined(INT_DOT)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_packed(int a, int b, spirv_literal int packed_vector_format);  // OpSDotKHR, 4x8 bits packed
int dot4(int a, int b) { return sdot_packed(a, b, 0); }
#else
int dot4(int a, int b) { return hsum(ivec4(unpack8(a)) * ivec4(unpack8(b))); }
#endif
// Bits 0..3 of b moved to bit 4 of bytes 0..3 (Q5's fifth bits of four values).
uint spread4(uint b) { return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25); }

// Block b of a weight row as 8 words of signed bytes (words 0..3: values 0..15, 4..7: values
// 16..31, as the activation block's words), its scale d and (Q4_1, Q5_1) its offset m.
void block_words(uint row, uint b, out int q[8], out float d, out float m) {
  const uint nb = p.cols / QK;
  const uint headers = (nb * HB + 15) & ~15u;     // a row's headers, padded to 16 bytes
  const uint row0 = row * (headers + nb * QS);    // the row, in bytes
  const uint h = (row0 + b * HB) / 2;             // the block's header, in 16-bit words
  const uint qi = (row0 + headers + b * QS) / 16; // its quants, in 16-byte words
  d = f16_bits_to_f32(w16u(h));
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
  m = f16_bits_to_f32(w16u(h + 1));
#else
  m = 0.0;
#endif
#if defined(TYPE_Q8_0)
  const uvec4 w0 = w128[qi], w1 = w128[qi + 1];
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    q[k] = int(w0[k]);
    q[4 + k] = int(w1[k]);
  }
#else
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
  const uint qh = w32at(h + (HB - 4) / 2);
#endif
  const uvec4 w = w128[qi];
  [[unroll]] for (uint k = 0; k < 4; ++k) {
    // Quant bytes 4k .. 4k+3: elements 4k.. (low nibbles) and 16+4k.. (high), four to a word.
    uint lo = w[k] & 0x0F0F0F0Fu, hi = (w[k] >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
    lo |= spread4(qh >> (4 * k));
    hi |= spread4(qh >> (16 + 4 * k));
#endif
#if defined(TYPE_Q4_0) || defined(TYPE_Q5_0)
    // Each byte v - 8 (Q4_0) or v - 16 (Q5_0) as a signed byte: v with its top bit flipped is
    // v - 8 (or - 16) in two's complement of 4 (5) bits, sign-extended to 8.
    const uint top = BLOCK_BYTES == 18 ? 0x08080808u : 0x10101010u;
    lo ^= top;
    hi ^= top;
    lo |= (lo & top) * (BLOCK_BYTES == 18 ? 0x1Eu : 0x0Fu);
    hi |= (hi & top) * (BLOCK_BYTES == 18 ? 0x1Eu : 0x0Fu);
#endif
    q[k] = int(lo);
    q[4 + k] = int(hi);
  }
#endif
}

// The block's dot with an activation block (its words x0: values 0..15, x1: 16..31; its scale
// ad and, Q8_1, its s = ad * sum): an exact integer sum, then the CPU's float products.
// precise: no fused multiply-add, which would round unlike the CPU's two products and a sum.
float block_value(const int q[8], float d, float m, ivec4 x0, ivec4 x1, float a_d, float a_s) {
  int sumi = 0;
  [[unroll]] for (uint k = 0; k < 4; ++k) sumi += dot4(q[k], x0[k]) + dot4(q[4 + k], x1[k]);
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
  precise const float r = float(sumi) * (d * a_d) + m * a_s;
#else
  precise const float r = float(sumi) * (d * a_d);
#endif
  return r;
}

float block_dot(uint row, uint b, uint xr) {
  const uint ab = xr * (p.cols / QK) + b;  // the activation block
  int q[8];
  float d, m;
  block_words(row, b, q, d, m);
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
  const float a_s = as_[ab];
#else
  const float a_s = 0.0;
#endif
  return block_value(q, d, m, aq128[2 * ab], aq128[2 * ab + 1], ad[ab], a_s);
}
#endif  // legacy types

#if defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS) || defined(TYPE_MXFP4)
#if defined(TYPE_MXFP4)
// ggml's kvalues_mxfp4 (kernels/iquants_impl.h kGridMxfp4): E2M1's values doubled, bit 3 the sign.
const int kGrid[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
#else
// ggml's kvalues_iq4nl (kernels/iquants_impl.h kGrid): the level each nibble stands for.
const int kGrid[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
#endif
// Integer dot of 32 values of paired nibbles at qs (value j: low nibble of byte j, value j + 16:
// its high nibble, Q4_0's pairing) with the 32 activations at a0.
int grid_dot(uint qs, uint a0) {
  int s = 0;
  for (uint j = 0; j < 16; ++j) {
    const uint v = wb(qs + j);
    s += kGrid[v & 15] * a8(a0 + j) + kGrid[v >> 4] * a8(a0 + j + 16);
  }
  return s;
}
#endif

#if defined(TYPE_IQ4_NL) || defined(TYPE_MXFP4)
#define QK 32
#if defined(TYPE_MXFP4)
// 17 bytes: the E8M0 exponent e, qs[16]. Its scale 2^(e - 128) as ggml's GGML_E8M0_TO_FP32_HALF
// builds it (kernels e8m0_half: the doubled grid's half of 2^(e - 127)): float bits (e - 1) << 23,
// or for e < 2 the subnormals 2^-128 and 2^-127 (which a device that flushes subnormals reads as 0:
// blocks of magnitude 2^-125 at most).
#define GRID_BLOCK_BYTES 17
float grid_scale(uint o) {
  const uint e = wb(o);
  return uintBitsToFloat(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}
#else
#define GRID_BLOCK_BYTES 18  // d (f16), qs[16]
float grid_scale(uint o) { return wf16(o); }
#endif
float block_dot(uint row, uint b, uint xr) {  // Q8_0 activations
  const uint nb = p.cols / QK;
  const uint o = (row * nb + b) * GRID_BLOCK_BYTES, ab = xr * nb + b;
  // precise: not fused with the matmul's sum of blocks into an FMA, which rounds unlike the CPU
  precise float r = (grid_scale(o) * ad[ab]) * float(grid_dot(o + GRID_BLOCK_BYTES - 16, ab * QK));
  return r;
}
#endif

#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K) || \
    defined(TYPE_IQ4_XS)
// Super-blocks of 256 values against Q8_K activations (kernels/kquants_ref.cpp, iquants_ref.cpp):
// integer sums per sub-block, exact, then the block's float scale products in the reference's order.
// `precise` keeps the compiler from fusing them (or the matmul's sum of blocks) into FMAs, which
// would round differently from the CPU. The activation block's bsums (sum of each 16 q8 values)
// are floats holding small integers.
#define QK 256
int bsum(uint ab, uint g) { return int(as_[ab * 16 + g]); }

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
// Scale and min of sub-block j (0..7) from the 12 bytes at s, as kquants' unpack_scales_mins:
// j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 low nibbles in byte j + 4, top bits in the
// spare top bits of bytes j - 4 (scale) and j (min).
void scale_min_k4(uint s, uint j, out int sc, out int m) {
  if (j < 4) {
    sc = int(wb(s + j) & 63);
    m = int(wb(s + j + 4) & 63);
  } else {
    sc = int((wb(s + j + 4) & 15) | ((wb(s + j - 4) >> 6) << 4));
    m = int((wb(s + j + 4) >> 4) | ((wb(s + j) >> 6) << 4));
  }
}
#endif

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K)
// These blocks split into BLOCK_PARTS parts of 32 values whose integer sums (block_part) add up,
// exactly in any order, to the block's; block_total applies the block's float scales to them. A
// decode matmul spreads one block's parts over neighbouring threads (matmul.comp's SPLIT): a
// 4096-wide row is 16 blocks, too few for a subgroup's threads.
#define BLOCK_PARTS 8
ivec2 block_part(uint row, uint b, uint xr, uint j) {
  const uint nb = p.cols / QK;
  const uint ab = xr * nb + b;
  const uint a0 = ab * QK;
#if defined(TYPE_Q6_K)
  // 210 bytes: ql[128], qh[64], scales[16] (int8), d (f16). Sub-block sj (16 values) is part
  // pp = (sj % 8) / 2 of half h = sj / 8: nibble pp / 2 of ql[64 h + 32 (pp % 2) + l] and bits 2 pp
  // of qh[32 h + l] (l = 16 (sj % 2) + k); the -32 offset through bsums. Part j: sub-blocks 2j, 2j+1.
  const uint o = (row * nb + b) * 210;
  int sum_q = 0;
  for (uint sj = 2 * j; sj < 2 * j + 2; ++sj) {
    const uint h = sj / 8, pp = (sj % 8) / 2, l0 = 16 * (sj % 2), a = a0 + 16 * sj;
    const uint ql = o + 64 * h + 32 * (pp % 2) + l0, qh = o + 128 + 32 * h + l0;
    // ql and qh offsets are even (the block is 210 bytes): 4 bytes as two 16-bit loads.
    int s = 0;
    [[unroll]] for (uint k = 0; k < 16; k += 4) {
      const ivec4 v = nibbles(w32at((ql + k) / 2), 4 * (pp / 2)) | (bytes_bits(w32at((qh + k) / 2), 2 * pp, 3) << 4);
      s += hsum(v * a4((a + k) / 4));
    }
    sum_q += int(int8_t(w[o + 192 + sj])) * (s - 32 * bsum(ab, sj));
  }
  return ivec2(sum_q, 0);
#else
  // Q4_K 144 bytes: d, dmin (f16), scales[12], qs[128]; Q5_K 176: the same with qh[32] before qs.
  // Sub-block j (32 values): nibble j % 2 of qs[32 (j / 2) + l]; Q5_K's fifth bit is bit j of qh[l].
#if defined(TYPE_Q4_K)
  const uint o = (row * nb + b) * 144, qs = o + 16;
#else
  const uint o = (row * nb + b) * 176, qh = o + 16, qs = o + 48;
#endif
  int sc, m;
  scale_min_k4(o + 4, j, sc, m);
  // Both blocks are whole 32-bit words (144, 176 bytes), their qs and qh too: 8 word loads a part.
  const uint q = (qs + 32 * (j / 2)) / 4, shift = 4 * (j % 2), a = (a0 + 32 * j) / 4;
  int s = 0;
  [[unroll]] for (uint l = 0; l < 8; ++l) {
#if defined(TYPE_Q4_K)
    const ivec4 v = nibbles(w32[q + l], shift);
#else
    const ivec4 v = nibbles(w32[q + l], shift) | (bytes_bits(w32[qh / 4 + l], j, 1) << 4);
#endif
    s += hsum(v * a4(a + l));
  }
  return ivec2(sc * s, m * (bsum(ab, 2 * j) + bsum(ab, 2 * j + 1)));
#endif
}

// The block's value from its parts' sums (sum_q, sum_m), as the reference scales them.
float block_total(uint row, uint b, uint xr, ivec2 sums) {
  const uint nb = p.cols / QK;
  const uint ab = xr * nb + b;
#if defined(TYPE_Q6_K)
  precise float r = (ad[ab] * wf16((row * nb + b) * 210 + 208)) * float(sums.x);
#else
#if defined(TYPE_Q4_K)
  const uint o = (row * nb + b) * 144;
#else
  const uint o = (row * nb + b) * 176;
#endif
  precise float r = ad[ab] * (wf16(o) * float(sums.x) - wf16(o + 2) * float(sums.y));
#endif
  return r;
}

float block_dot(uint row, uint b, uint xr) {
  ivec2 sums = ivec2(0);
  for (uint j = 0; j < BLOCK_PARTS; ++j) sums += block_part(row, b, xr, j);
  return block_total(row, b, xr, sums);
}

#else
float block_dot(uint row, uint b, uint xr) {
  const uint nb = p.cols / QK;
  const uint ab = xr * nb + b;  // the activation block: d at ad[ab], bsums at as_[ab * 16 ..]
  const uint a0 = ab * QK;
#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
  // Q2_K 84 bytes: scales[16] (sc low nibble, m high), qs[64], d, dmin (f16). Q3_K 110 bytes:
  // hmask[32], qs[64], scales[12] (6-bit, + 32), d (f16). Sub-block j (16 values) is part
  // pp = (j % 8) / 2 of half h = j / 8: bits 2 pp of qs[32 h + l] (l = 16 (j % 2) + k), Q3_K's
  // third bit at bit 4 h + pp of hmask[l].
#if defined(TYPE_Q2_K)
  const uint o = (row * nb + b) * 84, qs = o + 16;
#else
  const uint o = (row * nb + b) * 110, qs = o + 32, sb = o + 96;
#endif
  int sum_q = 0;
#if defined(TYPE_Q2_K)
  int sum_m = 0;
#endif
  for (uint j = 0; j < 16; ++j) {
    const uint h = j / 8, pp = (j % 8) / 2, l0 = 16 * (j % 2), a = a0 + 16 * j;
    int s = 0;
    for (uint k = 0; k < 16; ++k) {
#if defined(TYPE_Q2_K)
      const uint v = (wb(qs + 32 * h + l0 + k) >> (2 * pp)) & 3;
#else
      const uint v = ((wb(qs + 32 * h + l0 + k) >> (2 * pp)) & 3) | (((wb(o + l0 + k) >> (4 * h + pp)) & 1) << 2);
#endif
      s += int(v) * a8(a + k);
    }
#if defined(TYPE_Q2_K)
    const uint sm = wb(o + j);
    sum_q += int(sm & 15) * s;
    sum_m += int(sm >> 4) * bsum(ab, j);
#else
    // unpack_q3_scales: low 4 bits in nibble j / 8 of byte j % 8, top 2 at bits 2 (j / 4) of byte 8 + j % 4.
    const uint lo = (wb(sb + j % 8) >> (4 * (j / 8))) & 15, hi = (wb(sb + 8 + j % 4) >> (2 * (j / 4))) & 3;
    sum_q += (int(lo | (hi << 4)) - 32) * (s - 4 * bsum(ab, j));  // the -4 offset through bsums
#endif
  }
#if defined(TYPE_Q2_K)
  precise float r = ad[ab] * (wf16(o + 80) * float(sum_q) - wf16(o + 82) * float(sum_m));
#else
  precise float r = (ad[ab] * wf16(o + 108)) * float(sum_q);
#endif
  return r;
#else  // IQ4_XS
  // 136 bytes: d (f16), scales_h (u16), scales_l[4], qs[128]. Sub-block ib (32 values): scale
  // ls - 32, ls's low 4 bits in nibble ib % 2 of scales_l[ib / 2], its top 2 at bits 2 ib of
  // scales_h; its nibbles at qs + 16 ib, paired as IQ4_NL's.
  const uint o = (row * nb + b) * 136;
  const uint scales_h = wu16(o + 2);
  int sumi = 0;
  for (uint ib = 0; ib < 8; ++ib) {
    const uint ls = ((wb(o + 4 + ib / 2) >> (4 * (ib % 2))) & 15) | (((scales_h >> (2 * ib)) & 3) << 4);
    sumi += (int(ls) - 32) * grid_dot(o + 8 + 16 * ib, a0 + 32 * ib);
  }
  precise float r = (wf16(o) * ad[ab]) * float(sumi);
  return r;
#endif
}
#endif  // Q4_K Q5_K Q6_K, or the others
#endif  // 256-value blocks

#endif  // integer types

#ifndef QK
#error "blocks.glsl: no TYPE_* defined, or a type it does not know"
#endif
