#include "kernels/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace weft::kernels {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
  // The avx512 kernels use dpbusd for every int8 dot, so VNNI is part of the level; a
  // Skylake-X (AVX-512 without VNNI) runs the avx2 kernels instead.
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && f.avx512_vnni;
#endif
  if (const char* cap = std::getenv("WEFT_MAX_ISA")) {
    if (std::strcmp(cap, "avx2") == 0) {
      f.avx512 = false;
    } else if (std::strcmp(cap, "ref") == 0) {
      f.avx512 = false;
      f.avx2 = false;
    }
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_supported(const char* isa) {
  if (std::strcmp(isa, "ref") == 0) return true;
  if (std::strcmp(isa, "avx2") == 0) return cpu_features().avx2;
  if (std::strcmp(isa, "avx512") == 0) return cpu_features().avx512;
  return false;
}

}  // namespace weft::kernels
