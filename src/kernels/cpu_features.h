// What this CPU can run, read once from cpuid, and which kernel ISA levels (isa.h) that allows.
#pragma once

#include "kernels/isa.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::kernels {

struct CpuFeatures {
  bool avx2 = false;    // with FMA and F16C: Isa::Avx2
  bool avx512 = false;  // F, BW, VL, DQ and VNNI: Isa::Avx512
  bool avx512_vnni = false;
  // AVX-VNNI (vpdpbusd on ymm): the Avx2 level's one-token tiles use it (gemm_avx2.cpp).
  bool avx_vnni = false;
  // AMX-TILE and AMX-INT8 with the OS's tile state granted to this process: the Avx512 level's
  // prompt GEMM then runs on tiles (gemm_amx.cpp). Linux saves the tile registers only for a process
  // that asks (arch_prctl ARCH_REQ_XCOMP_PERM); without that grant a tile instruction faults, as it
  // does on VMs that advertise AMX in cpuid but not in XCR0.
  bool amx = false;
  // Bytes ahead of a first pass over panels repacked at load that the tiles ask into L2 (gemm_q8.h);
  // 0: Zen 4's rule instead (into L1, 32 blocks ahead, from 4 tokens; nothing for decode). Intel's
  // L2 streamer stops at every 4 KiB page and, beside the tiles' arithmetic, left one core at 80-85%
  // of a plain read; 2-3 KiB ahead gave 500m decode x1.08-1.21 and batched decode of 2-8 sequences
  // x1.07-1.25 on a Xeon with AMX, AVX-512 and AVX2 alike (4 KiB and more gained less, the L1 kind
  // lost for decode). On Zen 5 6 KiB ahead gave 500m decode q4_k_m x1.63 / x1.42 (one / two
  // threads), q6_k x1.26 / x1.11, q4_0 x1.05 / x1.00, q8_0 x0.97 / x0.99, prompts x0.98-1.01; 3 KiB
  // gained up to 11% less (q5_k, q4_k_m, q8_0 at one thread), 12 KiB up to 8% less. Zen 4 measured
  // only the L1 kind, so 0 there and off Intel and Zen 5. WEFT_L2_PREFETCH=<bytes> sets it (0: Zen 4's rule).
  size_t l2_prefetch = 0;
  // Batches of this many tokens and more take Zen 4's rule instead of l2_prefetch. Zen 5 from 4: 500m
  // q4_k_m batched decode (batched-bench -npp 64 -ntg 32), 3 rounds, L2 6 KiB ahead against Zen 4's rule,
  // one thread / two: 2 sequences x2.29 / x2.11, 4 x0.93 / x0.91, 8 x0.97 / x0.97.
  int64_t l2_prefetch_tokens = INT64_MAX;
  // One token's tiles read two panels at once, two streams from DRAM (gemm_q8.h, pair_tile_for):
  // on a Xeon 500m decode q4_0 x1.12 / x1.09 (one / two threads, plain AVX2), on Zen 5 x0.53-0.96
  // (one thread, plain AVX2, six legacy types), so only on Intel. WEFT_PAIR_PANELS=0|1 sets it.
  bool pair_panels = false;
};

// Detected once. WEFT_MAX_ISA=avx512|avxvnni|avx2|ref in the environment caps the levels (to compare
// kernels): AMX counts as above avx512, so WEFT_MAX_ISA=avx512 turns it off and keeps the VNNI
// kernels; AVX-VNNI as above avx2, so avx2 is plain AVX2 and avxvnni the avx2 level with it.
const CpuFeatures& cpu_features();

// The kernels this process runs, for logs (as llama.cpp's system_info line): "avx512 + amx tiles,
// L2 prefetch 3072 B", "avx2 + avx-vnni", "avx2", "ref".
std::string kernel_summary();

}  // namespace weft::kernels
