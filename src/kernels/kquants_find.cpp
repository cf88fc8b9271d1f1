// Entry points of kquants.h: per-type dispatch of the scalar references and the scalar table
// (the SIMD ones live in kquants_avx2.cpp and kquants_avx512.cpp).
#include "kernels/kquants.h"

#include "core/error.h"
#include "kernels/kquants_impl.h"
#include "kernels/rows_dot.h"

#include <array>

namespace weft::kernels::kquants {

namespace {

constexpr int kTypes = 6;  // Q4_K, Q5_K, Q6_K, Q8_K, Q2_K, Q3_K, in that order in each table

int type_index(DType t) {
  switch (t) {
    case DType::Q4_K: return 0;
    case DType::Q5_K: return 1;
    case DType::Q6_K: return 2;
    case DType::Q8_K: return 3;
    case DType::Q2_K: return 4;
    case DType::Q3_K: return 5;
    default: return -1;
  }
}

int checked_index(DType t) {
  const int i = type_index(t);
  if (i < 0) fail("kquants", "type {} is not a K-quant", static_cast<uint32_t>(t));
  return i;
}

using Table = std::array<TypeKernels, kTypes>;

constexpr Table kRef = {{
    {DType::Q4_K, DType::Q8_K, dequantize_row_q4_K_ref, quantize_row_q8_K_ref, vec_dot_q4_K_q8_K_ref,
     rows_dot_each<vec_dot_q4_K_q8_K_ref>, Isa::Scalar},
    {DType::Q5_K, DType::Q8_K, dequantize_row_q5_K_ref, quantize_row_q8_K_ref, vec_dot_q5_K_q8_K_ref,
     rows_dot_each<vec_dot_q5_K_q8_K_ref>, Isa::Scalar},
    {DType::Q6_K, DType::Q8_K, dequantize_row_q6_K_ref, quantize_row_q8_K_ref, vec_dot_q6_K_q8_K_ref,
     rows_dot_each<vec_dot_q6_K_q8_K_ref>, Isa::Scalar},
    {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_ref, nullptr, nullptr, Isa::Scalar},
    {DType::Q2_K, DType::Q8_K, dequantize_row_q2_K_ref, quantize_row_q8_K_ref, vec_dot_q2_K_q8_K_ref,
     rows_dot_each<vec_dot_q2_K_q8_K_ref>, Isa::Scalar},
    {DType::Q3_K, DType::Q8_K, dequantize_row_q3_K_ref, quantize_row_q8_K_ref, vec_dot_q3_K_q8_K_ref,
     rows_dot_each<vec_dot_q3_K_q8_K_ref>, Isa::Scalar},
}};

}  // namespace

bool handles(DType t) { return type_index(t) >= 0; }

void dequantize_ref(DType t, const void* src, float* dst, int64_t n) { kRef[checked_index(t)].dequantize(src, dst, n); }

void quantize_ref(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::Q4_K: return quantize_row_q4_K_ref(src, dst, n);
    case DType::Q5_K: return quantize_row_q5_K_ref(src, dst, n);
    case DType::Q6_K: return quantize_row_q6_K_ref(src, dst, n);
    case DType::Q8_K: return quantize_row_q8_K_ref(src, dst, n);
    case DType::Q2_K: return quantize_row_q2_K_ref(src, dst, n);
    case DType::Q3_K: return quantize_row_q3_K_ref(src, dst, n);
    default: fail("kquants", "type {} is not a K-quant", static_cast<uint32_t>(t));
  }
}

float vec_dot_ref(DType t, int64_t n, const void* w, const void* a) {
  const auto& k = kRef[checked_index(t)];
  if (!k.vec_dot) fail("kquants", "no dot product with {} as the weight type", static_cast<uint32_t>(t));
  return k.vec_dot(n, w, a);
}

template <>
TypeTable table<Isa::Scalar>() {
  return kRef;
}

}  // namespace weft::kernels::kquants
