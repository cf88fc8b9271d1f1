// What this CPU can run, read once from cpuid, and which kernel ISA levels (isa.h) that allows.
#pragma once

#include "kernels/isa.h"

namespace weft::kernels {

struct CpuFeatures {
  bool avx2 = false;    // with FMA and F16C: Isa::Avx2
  bool avx512 = false;  // F, BW, VL, DQ and VNNI: Isa::Avx512
  bool avx512_vnni = false;
  bool avx_vnni = false;
};

// Detected once. WEFT_MAX_ISA=avx2|ref in the environment caps the levels (to compare kernels).
// AMX is never used: some VMs advertise it but fault on it.
const CpuFeatures& cpu_features();

}  // namespace weft::kernels
