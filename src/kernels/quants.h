// Quantized block formats, bit-compatible with ggml (ggml-common.h), and the per-type kernels:
// dequantize, quantize, and the dot product of a weight row with an activation row.
//
// Each kernel has a plain scalar `_ref` version (the definition of correct) and SIMD variants
// in per-ISA files; `kernels_for()` picks the fastest one this CPU supports at run time.
#pragma once

#include "core/dtype.h"

#include <cstddef>
#include <cstdint>

namespace weft::kernels {

// Activation format a weight type's dot product consumes (llama.cpp's vec_dot_type):
// Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, F32 for F32/F16/BF16.
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
  DType act_type;               // vec_dot_type(type)
  DequantizeFn dequantize;      // weight row -> f32
  QuantizeFn quantize_act;      // f32 activation row -> act_type
  VecDotFn vec_dot;
  RowsDotFn rows_dot;
  const char* isa;              // "ref", "avx2", "avx512"
};

// Best kernels for weight type t on this CPU. Throws weft::Error for unsupported types.
const TypeKernels& kernels_for(DType t);
// Same, but restricted to an ISA level ("ref", "avx2", "avx512"); nullptr when not available.
const TypeKernels* kernels_for_isa(DType t, const char* isa);
// ISA levels this CPU can run, best first ("avx512", "avx2", "ref").
const char* best_isa();

}  // namespace weft::kernels
