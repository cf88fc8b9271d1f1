// Quantized block formats, bit-compatible with ggml (ggml-common.h), and the per-type kernels:
// dequantize, quantize, and the dot product of a weight row with an activation row.
//
// Each kernel has a plain scalar `_ref` version (the definition of correct) and SIMD variants
// in per-ISA files; `kernels_for()` picks the fastest one this CPU supports at run time (isa.h).
#pragma once

#include "core/dtype.h"
#include "kernels/isa.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace weft::kernels {

// Activation format a weight type's dot product consumes (llama.cpp's vec_dot_type):
// Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS, F32
// for F32/F16/BF16.
DType vec_dot_type(DType weight);

// Scalar references. n is the row length in elements, a multiple of the type's block size.
void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n);
void quantize_row_ref(DType t, const float* src, void* dst, int64_t n);
float vec_dot_ref(DType weight, int64_t n, const void* w_row, const void* act_row);

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
// Dot of one weight row with one activation row (already in vec_dot_type format).
using VecDotFn = float (*)(int64_t n, const void* w_row, const void* act_row);
// Dots of `n_rows` consecutive weight rows (stride w_stride bytes) with one activation row.
// Decode spends nearly all its time here: variants may process several rows per pass.
using RowsDotFn = void (*)(int64_t n, int64_t n_rows, const void* w, size_t w_stride, const void* act_row, float* out);

struct TypeKernels {
  DType type;
  DType act_type;           // vec_dot_type(type)
  DequantizeFn dequantize;  // weight row -> f32
  QuantizeFn quantize_act;  // f32 activation row -> act_type
  VecDotFn vec_dot;
  RowsDotFn rows_dot;
  Isa isa;  // the level these kernels need
};

// A kernel family's kernels at one ISA level, one entry per type it has kernels for. Every
// family (legacy + float types, K-quants) gives one per level; quants.cpp chooses between them.
using TypeTable = std::span<const TypeKernels>;
// The entry of type t in table, or nullptr.
const TypeKernels* find_type(TypeTable table, DType t);

// Best kernels for weight type t on this CPU: detected_isa(), else the next level down that has
// kernels for t. Throws weft::Error for unsupported types.
const TypeKernels& kernels_for(DType t);
// Same, but at one ISA level; nullptr when this CPU cannot run it or it has no kernels for t.
const TypeKernels* kernels_for_isa(DType t, Isa isa);

}  // namespace weft::kernels
