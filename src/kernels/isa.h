// Kernel ISA levels: the one enum every kernel family's tables are chosen by, the function-target
// attributes of the per-ISA files (spelled here once), and the small load helpers they share.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace weft::kernels {

// Levels, lowest first; a level's kernels may use everything of the levels below it.
enum class Isa {
  Scalar,  // plain C++: the references; named "ref"
  Avx2,    // AVX2 + FMA + F16C; "avx2"
  Avx512,  // AVX-512 F/BW/VL/DQ + VNNI (every int8 dot is a dpbusd); "avx512". A Skylake-X
           // (AVX-512 without VNNI) runs Avx2.
  Count,
};
constexpr int kIsaCount = static_cast<int>(Isa::Count);

// "ref", "avx2", "avx512": the names WEFT_MAX_ISA, test traces and benchmark labels use.
const char* isa_name(Isa isa);
// Inverse of isa_name; nullopt for any other name.
std::optional<Isa> parse_isa(std::string_view name);
// The best level this CPU runs (cpu_features(), capped by WEFT_MAX_ISA), detected once.
Isa detected_isa();
// Whether kernels of level `isa` may run here: isa <= detected_isa().
bool isa_supported(Isa isa);

// get(isa) for detected_isa(), then for each lower level down to Scalar, until one is non-null:
// the choice of table, written once for every kernel family (a family may lack some levels).
template <class Get>
auto find_best(Get&& get) -> decltype(get(Isa::Scalar)) {
  for (int i = static_cast<int>(detected_isa()); i >= 0; --i)
    if (auto k = get(static_cast<Isa>(i))) return k;
  return nullptr;
}

// Unaligned little-endian 32-bit loads (x86 is little-endian), for packed quant fields.
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace weft::kernels

// Function attributes of the per-ISA kernel files. Only functions carrying them are compiled for
// the ISA (no per-file flags), so the binary still runs on CPUs without it; a table of them is
// only used where isa_supported(). The Avx2 set is a subset of the Avx512 one, so helpers marked
// WEFT_TARGET_AVX2 inline into both.
#define WEFT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define WEFT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
// The Avx2 level's tiles for CPUs with AVX-VNNI (vpdpbusd on ymm, VEX-encoded: Alder Lake and later
// Intel cores without AVX-512; CPUs with both run them under WEFT_MAX_ISA=avxvnni), chosen at run
// time (cpu_features().avx_vnni).
#define WEFT_TARGET_AVX_VNNI __attribute__((target("avxvnni,avx2,fma,f16c")))
// For small helpers that must inline into their callers (one instruction or a few).
#define WEFT_ALWAYS_INLINE inline __attribute__((always_inline))
// Every function that returns a struct of one vector (F32x8 {__m256}, F32x16 {__m512}) must inline:
// GCC 12 compiles such a function, when it has a target attribute and stays out of line, with a
// vzeroupper between setting ymm0 / zmm0 and ret, which zeroes all lanes above the lowest 128 bits
// of the result (bench/results.md, "GCC 12 and vector returns"). WEFT_SIMD_TARGET is the file's ISA.
#define WEFT_SIMD_INLINE WEFT_SIMD_TARGET WEFT_ALWAYS_INLINE
