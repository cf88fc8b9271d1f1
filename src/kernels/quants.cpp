// Kernel dispatch: routes each type to its family (legacy + float types in quants_legacy*.cpp,
// K-quants in kquants*.cpp, IQ4_NL / IQ4_XS / MXFP4 in iquants*.cpp) and picks the best ISA level this CPU runs.
#include "kernels/quants.h"

#include "core/error.h"
#include "kernels/iquants.h"
#include "kernels/isa.h"
#include "kernels/kquants.h"
#include "kernels/quants_legacy.h"

#include <array>

namespace weft::kernels {
namespace {

// A family's table at each level, indexed by Isa.
using FamilyTables = std::array<TypeTable (*)(), kIsaCount>;
constexpr FamilyTables kLegacy = {legacy::table<Isa::Scalar>, legacy::table<Isa::Avx2>, legacy::table<Isa::Avx512>};
constexpr FamilyTables kKQuants = {kquants::table<Isa::Scalar>, kquants::table<Isa::Avx2>, kquants::table<Isa::Avx512>};
constexpr FamilyTables kIQuants = {iquants::table<Isa::Scalar>, iquants::table<Isa::Avx2>, iquants::table<Isa::Avx512>};

[[noreturn]] void unsupported(const char* what, DType t) {
  fail("kernels", "{}: type {} is not supported", what, dtype_name(t));
}

}  // namespace

DType vec_dot_type(DType weight) {
  switch (weight) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return DType::F32;
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return DType::Q8_K;
    default: unsupported("vec_dot_type", weight);
  }
}

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) {
  if (legacy::handles(t)) return legacy::dequantize_ref(t, src, dst, n);
  if (kquants::handles(t)) return kquants::dequantize_ref(t, src, dst, n);
  if (iquants::handles(t)) return iquants::dequantize_ref(t, src, dst, n);
  unsupported("dequantize", t);
}

void quantize_row_ref(DType t, const float* src, void* dst, int64_t n) {
  if (legacy::handles(t)) return legacy::quantize_ref(t, src, dst, n);
  if (kquants::handles(t)) return kquants::quantize_ref(t, src, dst, n);
  if (iquants::handles(t)) return iquants::quantize_ref(t, src, dst, n);
  unsupported("quantize", t);
}

float vec_dot_ref(DType weight, int64_t n, const void* w_row, const void* act_row) {
  if (legacy::has_kernels(weight)) return legacy::vec_dot_ref(weight, n, w_row, act_row);
  if (kquants::handles(weight) && weight != DType::Q8_K) return kquants::vec_dot_ref(weight, n, w_row, act_row);
  if (iquants::handles(weight)) return iquants::vec_dot_ref(weight, n, w_row, act_row);
  unsupported("vec_dot", weight);
}

const TypeKernels* find_type(TypeTable table, DType t) {
  for (const TypeKernels& k : table)
    if (k.type == t) return &k;
  return nullptr;
}

const TypeKernels* kernels_for_isa(DType t, Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  const FamilyTables& family = kquants::handles(t) ? kKQuants : iquants::handles(t) ? kIQuants : kLegacy;
  return find_type(family[static_cast<int>(isa)](), t);
}

const TypeKernels& kernels_for(DType t) {
  if (const TypeKernels* k = find_best([t](Isa isa) { return kernels_for_isa(t, isa); })) return *k;
  unsupported("kernels_for", t);
}

}  // namespace weft::kernels
