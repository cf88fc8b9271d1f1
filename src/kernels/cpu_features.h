// What this CPU can run, read once from cpuid, and which kernel ISA levels (isa.h) that allows.
#pragma once

#include "kernels/isa.h"

namespace weft::kernels {

struct CpuFeatures {
  bool avx2 = false;    // with FMA and F16C: Isa::Avx2
  bool avx512 = false;  // F, BW, VL, DQ and VNNI: Isa::Avx512
  bool avx512_vnni = false;
  bool avx_vnni = false;
  // AMX-TILE and AMX-INT8 with the OS's tile state granted to this process: the Avx512 level's
  // prompt GEMM then runs on tiles (gemm_amx.cpp). Linux saves the tile registers only for a process
  // that asks (arch_prctl ARCH_REQ_XCOMP_PERM); without that grant a tile instruction faults, as it
  // does on VMs that advertise AMX in cpuid but not in XCR0.
  bool amx = false;
};

// Detected once. WEFT_MAX_ISA=avx512|avx2|ref in the environment caps the levels (to compare kernels):
// AMX counts as above avx512, so WEFT_MAX_ISA=avx512 turns it off and keeps the VNNI kernels.
const CpuFeatures& cpu_features();

}  // namespace weft::kernels
