// The ops table of one vector type V: every loop of ops_simd.h and attention_simd.h, for the ISA
// file that defines V and WEFT_SIMD_TARGET.
#pragma once

#include "kernels/attention_simd.h"
#include "kernels/ops_simd.h"

namespace weft::kernels::detail::simd {

template <class V>
const OpsKernels& table(Isa isa) {  // only takes addresses: no ISA needed
  static const OpsKernels k{sum_sq<V>,         scale_mul<V>,        max_of<V>,     exp_sum<V>,     scale<V>,
                            silu<V>,           swiglu<V>,           geglu<V>,      add<V>,         to_f16<V>,
                            attention_rows<V>, attention_decode<V>, delta_step<V>, delta_chunk<V>, isa};
  return k;
}

}  // namespace weft::kernels::detail::simd
