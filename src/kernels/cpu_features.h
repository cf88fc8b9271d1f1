// What this CPU can run, read once from cpuid, and which kernel ISA levels that allows.
#pragma once

namespace weft::kernels {

struct CpuFeatures {
  bool avx2 = false;        // with FMA and F16C: the "avx2" kernel level
  bool avx512 = false;      // F, BW, VL, DQ and VNNI: the "avx512" kernel level
  bool avx512_vnni = false;
  bool avx_vnni = false;
};

// Detected once. WEFT_MAX_ISA=avx2|ref in the environment caps the levels (to compare kernels).
// AMX is never used: some VMs advertise it but fault on it.
const CpuFeatures& cpu_features();

// Whether kernels of ISA level `isa` ("ref", "avx2", "avx512") may run here.
bool isa_supported(const char* isa);

}  // namespace weft::kernels
