// Kernel dispatch: routes each type to its family (legacy + float types here, K-quants in
// kquants*.cpp) and picks the best ISA level this CPU runs.
#include "kernels/quants.h"

#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/quants_legacy.h"

#include <cstring>

#if __has_include("kernels/kquants.h")
#include "kernels/kquants.h"
#define WEFT_HAVE_KQUANTS 1
#else
#define WEFT_HAVE_KQUANTS 0
#endif

namespace weft::kernels {
namespace {

// Best first; each level is only offered where cpu_features() allows it.
constexpr const char* kIsaLevels[] = {"avx512", "avx2", "ref"};

bool is_kquant(DType t) {
#if WEFT_HAVE_KQUANTS
  return kquants::handles(t);
#else
  return false;
#endif
}

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
    case DType::Q8_0: return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return DType::Q8_K;
    default: unsupported("vec_dot_type", weight);
  }
}

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) {
  if (legacy::handles(t)) return legacy::dequantize_ref(t, src, dst, n);
#if WEFT_HAVE_KQUANTS
  if (kquants::handles(t)) return kquants::dequantize_ref(t, src, dst, n);
#endif
  unsupported("dequantize", t);
}

void quantize_row_ref(DType t, const float* src, void* dst, int64_t n) {
  if (legacy::handles(t)) return legacy::quantize_ref(t, src, dst, n);
#if WEFT_HAVE_KQUANTS
  if (kquants::handles(t)) return kquants::quantize_ref(t, src, dst, n);
#endif
  unsupported("quantize", t);
}

float vec_dot_ref(DType weight, int64_t n, const void* w_row, const void* act_row) {
  if (legacy::has_kernels(weight)) return legacy::vec_dot_ref(weight, n, w_row, act_row);
#if WEFT_HAVE_KQUANTS
  if (kquants::handles(weight) && weight != DType::Q8_K) return kquants::vec_dot_ref(weight, n, w_row, act_row);
#endif
  unsupported("vec_dot", weight);
}

const TypeKernels* kernels_for_isa(DType t, const char* isa) {
  if (!isa_supported(isa)) return nullptr;
  if (legacy::has_kernels(t)) {
    if (std::strcmp(isa, "avx512") == 0) return legacy::find_avx512(t);
    if (std::strcmp(isa, "avx2") == 0) return legacy::find_avx2(t);
    return legacy::find_ref(t);
  }
#if WEFT_HAVE_KQUANTS
  if (kquants::handles(t)) return kquants::find(t, isa);
#endif
  return nullptr;
}

const TypeKernels& kernels_for(DType t) {
  if (!legacy::has_kernels(t) && !is_kquant(t)) unsupported("kernels_for", t);
  for (const char* isa : kIsaLevels)
    if (const TypeKernels* k = kernels_for_isa(t, isa)) return *k;
  unsupported("kernels_for", t);
}

const char* best_isa() {
  for (const char* isa : kIsaLevels)
    if (isa_supported(isa)) return isa;
  return "ref";
}

}  // namespace weft::kernels
