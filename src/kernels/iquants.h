// Grid 4-bit weights (llama.cpp's IQ4_NL, IQ4_XS and MXFP4), bit-compatible with ggml-common.h: each
// nibble indexes a fixed grid of 16 int8 levels instead of being the level itself.
//   IQ4_NL: 32 values per block, an fp16 scale and Q4_0's 16 bytes of paired nibbles, the grid
//   kvalues_iq4nl; Q8_0 activations.
//   IQ4_XS: 256 values per block, an fp16 d, eight 6-bit sub-block scales (stored + 32) and the same
//   nibbles per 32 values; Q8_K activations.
//   MXFP4 (OCP microscaling FP4, gpt-oss's experts): IQ4_NL's block with an E8M0 exponent byte for
//   the fp16 scale and the grid kvalues_mxfp4 (E2M1's values doubled); Q8_0 activations.
// The dispatcher in quants.cpp routes these types here; everything else sees only this header.
#pragma once

#include "core/dtype.h"
#include "kernels/isa.h"
#include "kernels/quants.h"

#include <cstdint>

namespace weft::kernels::iquants {

bool handles(DType t);  // IQ4_NL, IQ4_XS, MXFP4

// Scalar references; n is a multiple of the type's block size. quantize_ref fits each IQ4 scale by
// least squares over a range of candidates (valid ggml data, not bit-identical to ggml's quantizer);
// MXFP4's exponent follows ggml's quantize_row_mxfp4_ref (from the block's largest magnitude).
void dequantize_ref(DType t, const void* src, float* dst, int64_t n);
void quantize_ref(DType t, const float* src, void* dst, int64_t n);
// w: a row of t, a: a row of vec_dot_type(t), both of n values.
float vec_dot_ref(DType t, int64_t n, const void* w, const void* a);

// This family's kernels at one ISA level (iquants_ref.cpp, iquants_avx2.cpp), one entry per type.
template <Isa I>
TypeTable table();
template <>
TypeTable table<Isa::Scalar>();
template <>
TypeTable table<Isa::Avx2>();
template <>
TypeTable table<Isa::Avx512>();

}  // namespace weft::kernels::iquants
