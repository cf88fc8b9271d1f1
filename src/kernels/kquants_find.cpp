// Entry points of kquants.h: per-type dispatch of the scalar references and the kernel tables
// per ISA level, each offered only where this CPU can run it.
#include "kernels/kquants.h"

#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/kquants_impl.h"

#include <array>
#include <cstring>

namespace weft::kernels::kquants {

namespace {

constexpr int kTypes = 4;  // Q4_K, Q5_K, Q6_K, Q8_K, in that order in each table

int type_index(DType t) {
  switch (t) {
    case DType::Q4_K: return 0;
    case DType::Q5_K: return 1;
    case DType::Q6_K: return 2;
    case DType::Q8_K: return 3;
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
     rows_dot_q4_K_q8_K_ref, "ref"},
    {DType::Q5_K, DType::Q8_K, dequantize_row_q5_K_ref, quantize_row_q8_K_ref, vec_dot_q5_K_q8_K_ref,
     rows_dot_q5_K_q8_K_ref, "ref"},
    {DType::Q6_K, DType::Q8_K, dequantize_row_q6_K_ref, quantize_row_q8_K_ref, vec_dot_q6_K_q8_K_ref,
     rows_dot_q6_K_q8_K_ref, "ref"},
    {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_ref, nullptr, nullptr, "ref"},
}};

constexpr Table kAvx2 = {{
    {DType::Q4_K, DType::Q8_K, dequantize_row_q4_K_ref, quantize_row_q8_K_avx2, vec_dot_q4_K_q8_K_avx2,
     rows_dot_q4_K_q8_K_avx2, "avx2"},
    {DType::Q5_K, DType::Q8_K, dequantize_row_q5_K_ref, quantize_row_q8_K_avx2, vec_dot_q5_K_q8_K_avx2,
     rows_dot_q5_K_q8_K_avx2, "avx2"},
    {DType::Q6_K, DType::Q8_K, dequantize_row_q6_K_ref, quantize_row_q8_K_avx2, vec_dot_q6_K_q8_K_avx2,
     rows_dot_q6_K_q8_K_avx2, "avx2"},
    {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_avx2, nullptr, nullptr, "avx2"},
}};

constexpr Table kAvx512 = {{
    {DType::Q4_K, DType::Q8_K, dequantize_row_q4_K_ref, quantize_row_q8_K_avx512, vec_dot_q4_K_q8_K_avx512,
     rows_dot_q4_K_q8_K_avx512, "avx512"},
    {DType::Q5_K, DType::Q8_K, dequantize_row_q5_K_ref, quantize_row_q8_K_avx512, vec_dot_q5_K_q8_K_avx512,
     rows_dot_q5_K_q8_K_avx512, "avx512"},
    {DType::Q6_K, DType::Q8_K, dequantize_row_q6_K_ref, quantize_row_q8_K_avx512, vec_dot_q6_K_q8_K_avx512,
     rows_dot_q6_K_q8_K_avx512, "avx512"},
    {DType::Q8_K, DType::Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_avx512, nullptr, nullptr, "avx512"},
}};

bool cpu_has_avx2() { return cpu_features().avx2; }
bool cpu_has_avx512() { return cpu_features().avx512; }

}  // namespace

bool handles(DType t) { return type_index(t) >= 0; }

void dequantize_ref(DType t, const void* src, float* dst, int64_t n) {
  kRef[checked_index(t)].dequantize(src, dst, n);
}

void quantize_ref(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::Q4_K: return quantize_row_q4_K_ref(src, dst, n);
    case DType::Q5_K: return quantize_row_q5_K_ref(src, dst, n);
    case DType::Q6_K: return quantize_row_q6_K_ref(src, dst, n);
    case DType::Q8_K: return quantize_row_q8_K_ref(src, dst, n);
    default: fail("kquants", "type {} is not a K-quant", static_cast<uint32_t>(t));
  }
}

float vec_dot_ref(DType t, int64_t n, const void* w, const void* a) {
  const auto& k = kRef[checked_index(t)];
  if (!k.vec_dot) fail("kquants", "no dot product with {} as the weight type", static_cast<uint32_t>(t));
  return k.vec_dot(n, w, a);
}

const TypeKernels* find(DType t, const char* isa) {
  const int i = type_index(t);
  if (i < 0 || isa == nullptr) return nullptr;
  if (std::strcmp(isa, "ref") == 0) return &kRef[i];
  if (std::strcmp(isa, "avx2") == 0) return cpu_has_avx2() ? &kAvx2[i] : nullptr;
  if (std::strcmp(isa, "avx512") == 0) return cpu_has_avx512() ? &kAvx512[i] : nullptr;
  return nullptr;
}

}  // namespace weft::kernels::kquants
