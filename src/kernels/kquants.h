// K-quant kernels: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights with Q8_K activations (ggml's super-block formats,
// 256 values per block, bit-compatible with ggml-common.h). The dispatcher in quants.cpp routes
// these types here; everything else in this module sees only this header.
#pragma once

#include "core/dtype.h"
#include "kernels/isa.h"
#include "kernels/quants.h"

#include <cstdint>

namespace weft::kernels::kquants {

// Whether t is one of the types below: Q2_K .. Q6_K (weights) or Q8_K (activations).
bool handles(DType t);

// Scalar references; n is a multiple of 256. Throws weft::Error for a type not handled.
void dequantize_ref(DType t, const void* src, float* dst, int64_t n);
// Also Q8_K. Weight types fit a scale and min per sub-block by weighted least squares; the
// result is valid ggml data but need not be bit-identical to ggml's quantizer.
void quantize_ref(DType t, const float* src, void* dst, int64_t n);
// w: a Q2_K .. Q6_K row, a: a Q8_K row, both of n values.
float vec_dot_ref(DType t, int64_t n, const void* w, const void* a);

// This family's kernels at one ISA level (kquants_find.cpp, kquants_avx2.cpp, kquants_avx512.cpp),
// one entry per type above; a SIMD level's table must only be used where isa_supported().
// For Q8_K an entry has dequantize and quantize_act only (vec_dot and rows_dot null).
template <Isa I>
TypeTable table();
template <>
TypeTable table<Isa::Scalar>();
template <>
TypeTable table<Isa::Avx2>();
template <>
TypeTable table<Isa::Avx512>();

}  // namespace weft::kernels::kquants
