// Internal to src/kernels: ggml's legacy block layouts (ggml-common.h) and the per-ISA kernel
// tables for the float weight types (F32/F16/BF16) and Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 (activations Q8_0/Q8_1).
// quants.cpp picks a table; tests may reach a specific ISA's table through here.
#pragma once

#include "kernels/isa.h"
#include "kernels/quants.h"

#include <cstdint>

namespace weft::kernels::gemm {
struct ActBlock;  // gemm_q8.h
}  // namespace weft::kernels::gemm

namespace weft::kernels::legacy {

constexpr int kQK = 32;  // elements per block, every legacy type

// Weights. d (and m) are IEEE half; nibble j holds element j (low) and element j + 16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d, m;  // element = q * d + m
  uint8_t qs[kQK / 2];
};
// Q5: bit j of the little-endian 32-bit qh is bit 4 of element j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activation format of Q4_1/Q5_1: s = d * sum(qs) folds the weights' m term into one product.
struct BlockQ8_1 {
  uint16_t d, s;
  int8_t qs[kQK];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);

// Types this family can (de)quantize: the weight types below plus Q8_1.
bool handles(DType t);
// Weight types with dot kernels: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
bool has_kernels(DType t);

void dequantize_ref(DType t, const void* src, float* dst, int64_t n);
// dequantize_ref of one type, for the ISA tables of types without a SIMD dequantize (only the
// embedding lookup dequantizes, a row per token).
template <DType T>
void dequantize_ref_of(const void* src, float* dst, int64_t n) {
  dequantize_ref(T, src, dst, n);
}
void quantize_ref(DType t, const float* src, void* dst, int64_t n);
float vec_dot_ref(DType weight, int64_t n, const void* w_row, const void* act_row);

// One block's dot in plain C: the shared tail for SIMD loops with an odd block left over.
float dot_block_q4_0(const BlockQ4_0& w, const BlockQ8_0& a);
float dot_block_q4_1(const BlockQ4_1& w, const BlockQ8_1& a);
float dot_block_q5_0(const BlockQ5_0& w, const BlockQ8_0& a);
float dot_block_q5_1(const BlockQ5_1& w, const BlockQ8_1& a);
float dot_block_q8_0(const BlockQ8_0& w, const BlockQ8_0& a);

// This family's kernels at one ISA level, one entry per weight type with kernels; defined in
// quants_legacy_{ref,avx2,avx512}.cpp. A SIMD level's table must only be used where isa_supported().
template <Isa I>
TypeTable table();
template <>
TypeTable table<Isa::Scalar>();
template <>
TypeTable table<Isa::Avx2>();
template <>
TypeTable table<Isa::Avx512>();

// An f32 activation row straight into the prompt GEMM's activation blocks for weight type t (block
// b at out[b * n_tokens]): gemm::prepare_act_row of the Q8_0 row this level's quantize_act writes,
// bit for bit, in one pass (no row in between, and the block sums come from the quantizer).
// Q4_0, Q5_0 and Q8_0 at the SIMD levels; nullptr for other types and at Scalar.
using ActBlocksFn = void (*)(const float* x, int64_t n, gemm::ActBlock* out, int64_t n_tokens);
template <Isa I>
ActBlocksFn act_blocks(DType t);
template <>
ActBlocksFn act_blocks<Isa::Scalar>(DType t);
template <>
ActBlocksFn act_blocks<Isa::Avx2>(DType t);
template <>
ActBlocksFn act_blocks<Isa::Avx512>(DType t);

}  // namespace weft::kernels::legacy
