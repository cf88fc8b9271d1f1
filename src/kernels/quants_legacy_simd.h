// The parts of the legacy types' SIMD tables that do not depend on the ISA, written once: the
// activation quantizers' block loops, the row drivers (rows_dot.h) and the table itself.
// quants_legacy_avx2.cpp and quants_legacy_avx512.cpp each define WEFT_SIMD_TARGET (their ISA's
// attribute, isa.h) before including this, and pass their kernels as an A (see table below).
#pragma once

#include "core/fp16.h"
#include "kernels/gemm_q8.h"
#include "kernels/quants_legacy.h"
#include "kernels/rows_dot.h"

#include <cstring>

#ifndef WEFT_SIMD_TARGET
#error "define WEFT_SIMD_TARGET (the ISA's target attribute) before including quants_legacy_simd.h"
#endif

namespace weft::kernels::legacy::simd {

// Q::block(x, &d16, qs, d): 32 floats -> qs with d = amax / 127 as the ref; returns sum(qs) (a
// WEFT_ALWAYS_INLINE function of the same target). Both quantizers are bit-identical to
// quantize_q8_{0,1} in quants_legacy_ref.cpp.
template <class Q>
WEFT_SIMD_TARGET void quantize_act_q8_0(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  float d;
  for (int64_t i = 0; i < n / kQK; ++i) Q::block(x + i * kQK, &b[i].d, b[i].qs, d);
}

template <class Q>
WEFT_SIMD_TARGET void quantize_act_q8_1(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d;
    const int sum = Q::block(x + i * kQK, &b[i].d, b[i].qs, d);
    b[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

// quantize_act_q8_0 then gemm::prepare_act_row in one pass (legacy::act_blocks).
template <class Q, DType kWeight>
WEFT_SIMD_TARGET void quantize_act_blocks_q8_0(const float* x, int64_t n, gemm::ActBlock* out, int64_t n_tokens) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    gemm::ActBlock& o = out[b * n_tokens];
    uint16_t d16;
    float d;
    const int sum = Q::block(x + b * kQK, &d16, o.q, d);
    o.d = fp16_to_f32(d16);
    o.s = 0;
    o.c0 = -gemm::act_offset(kWeight) * sum;
    o.c1 = 0;
  }
}
template <class Q>
ActBlocksFn act_blocks_of(DType t) {
  switch (t) {
    case DType::Q4_0: return quantize_act_blocks_q8_0<Q, DType::Q4_0>;
    case DType::Q5_0: return quantize_act_blocks_q8_0<Q, DType::Q5_0>;
    case DType::Q8_0: return quantize_act_blocks_q8_0<Q, DType::Q8_0>;
    default: return nullptr;
  }
}

// Float weight types take their f32 activations as they are.
inline void copy_f32(const float* x, void* dst, int64_t n) { std::memcpy(dst, x, n * sizeof(float)); }

// The passes of an ISA's quant kernel K / float loader L, as rows_dot.h drives them.
template <class A, class K>
struct QuantDot {
  static constexpr int kPass = A::kRowsPerPass;
  template <int R>
  static constexpr DotRowsFn rows = A::template dot<K, R>;
};
template <class A, class L>
struct FloatDot {
  static constexpr int kPass = A::kRowsPerPass;
  template <int R>
  static constexpr DotRowsFn rows = A::template dot_float<L, R>;
};

// The table of one ISA. A gives kIsa, kRowsPerPass (rows sharing each activation load), the
// block kernels KQ4_0, KQ4_1, KQ5_0, KQ5_1, KQ8_0 and float loaders LF32, LF16, LBF16 (types),
// dot<K, R> and dot_float<L, R> (DotRowsFn over R rows), dequant_float<L>, dequant_q4_0,
// dequant_q8_0 (the other types dequantize with the ref) and QuantizeQ8 (a Q as above).
template <class A>
TypeTable table_of() {
  using Q4_0 = QuantDot<A, typename A::KQ4_0>;
  using Q4_1 = QuantDot<A, typename A::KQ4_1>;
  using Q5_0 = QuantDot<A, typename A::KQ5_0>;
  using Q5_1 = QuantDot<A, typename A::KQ5_1>;
  using Q8_0 = QuantDot<A, typename A::KQ8_0>;
  using F32 = FloatDot<A, typename A::LF32>;
  using F16 = FloatDot<A, typename A::LF16>;
  using BF16 = FloatDot<A, typename A::LBF16>;
  constexpr QuantizeFn q8_0 = quantize_act_q8_0<typename A::QuantizeQ8>;
  constexpr QuantizeFn q8_1 = quantize_act_q8_1<typename A::QuantizeQ8>;
  constexpr Isa isa = A::kIsa;
  static constexpr TypeKernels kTable[] = {
      {DType::F32, DType::F32, A::template dequant_float<typename A::LF32>, copy_f32, vec_dot<F32>, rows_dot<F32>, isa},
      {DType::F16, DType::F32, A::template dequant_float<typename A::LF16>, copy_f32, vec_dot<F16>, rows_dot<F16>, isa},
      {DType::BF16, DType::F32, A::template dequant_float<typename A::LBF16>, copy_f32, vec_dot<BF16>, rows_dot<BF16>,
       isa},
      {DType::Q4_0, DType::Q8_0, A::dequant_q4_0, q8_0, vec_dot<Q4_0>, rows_dot<Q4_0>, isa},
      {DType::Q4_1, DType::Q8_1, dequantize_ref_of<DType::Q4_1>, q8_1, vec_dot<Q4_1>, rows_dot<Q4_1>, isa},
      {DType::Q5_0, DType::Q8_0, dequantize_ref_of<DType::Q5_0>, q8_0, vec_dot<Q5_0>, rows_dot<Q5_0>, isa},
      {DType::Q5_1, DType::Q8_1, dequantize_ref_of<DType::Q5_1>, q8_1, vec_dot<Q5_1>, rows_dot<Q5_1>, isa},
      {DType::Q8_0, DType::Q8_0, A::dequant_q8_0, q8_0, vec_dot<Q8_0>, rows_dot<Q8_0>, isa},
  };
  return kTable;
}

}  // namespace weft::kernels::legacy::simd
