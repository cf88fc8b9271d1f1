#include "kernels/cpu_features.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace weft::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool bit(uint32_t reg, int b) { return (reg >> b) & 1u; }
#endif

// Asks Linux to save the AMX tile data (XFEATURE 18) for this process: granted once, for every
// thread. False where the kernel predates the request (5.16) or refuses it.
bool request_amx_state() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// Straight from cpuid and xgetbv (gcc's and clang's __builtin_cpu_supports know different
// feature names): a feature counts only if the OS also saves its registers.
CpuFeatures detect() {
  CpuFeatures f;
  bool tiles = false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const bool intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "Genu" "ineI" "ntel"
  const bool amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;    // "Auth" "enti" "cAMD"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  // The family as AMD numbers it (0x19 Zen 3/4, 0x1a Zen 5): base, plus extended where base is 0xf.
  const unsigned family = ((a >> 8) & 0xf) == 0xf ? 0xf + ((a >> 20) & 0xff) : (a >> 8) & 0xf;
  const bool fma = bit(c, 12), osxsave = bit(c, 27), avx = bit(c, 28), f16c = bit(c, 29);
  uint64_t xcr0 = 0;
  if (osxsave) {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool ymm_saved = (xcr0 & 0x6) == 0x6, zmm_saved = (xcr0 & 0xe6) == 0xe6;
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  __cpuid_count(7, 1, a71, b71, c71, d71);
  f.avx2 = avx && ymm_saved && fma && f16c && bit(b7, 5);
  f.avx512_vnni = zmm_saved && bit(c7, 11);
  f.avx_vnni = ymm_saved && bit(a71, 4);
  // The avx512 kernels use dpbusd for every int8 dot, so VNNI is part of the level; a
  // Skylake-X (AVX-512 without VNNI) runs the avx2 kernels instead.
  f.avx512 = f.avx2 && zmm_saved && bit(b7, 16) /*F*/ && bit(b7, 17) /*DQ*/ && bit(b7, 30) /*BW*/ &&
             bit(b7, 31) /*VL*/ && f.avx512_vnni;
  // Tiles: AMX-TILE (edx 24) and AMX-INT8 (edx 25), XTILECFG and XTILEDATA enabled in XCR0.
  tiles = bit(d7, 24) && bit(d7, 25) && (xcr0 & 0x60000) == 0x60000;
  if (intel) f.l2_prefetch = 3072;
  if (amd && family >= 0x1a) {
    f.l2_prefetch = 6144;
    f.l2_prefetch_tokens = 4;
  }
  f.pair_panels = intel;
#endif
  // A value that is not a whole number of bytes leaves the default.
  if (const char* env = std::getenv("WEFT_L2_PREFETCH")) {
    const std::string_view ahead(env);
    size_t bytes = 0;
    const auto [end, ec] = std::from_chars(ahead.data(), ahead.data() + ahead.size(), bytes);
    if (ec == std::errc() && end == ahead.data() + ahead.size()) f.l2_prefetch = bytes;
  }
  if (const char* env = std::getenv("WEFT_PAIR_PANELS")) {  // "0" or "1"; anything else leaves the default
    const std::string_view on(env);
    if (on == "0" || on == "1") f.pair_panels = on == "1";
  }
  // An unknown name caps nothing; "avx512" caps only AMX. AVX-VNNI counts above avx2, as AMX above
  // avx512: "avx2" is plain AVX2 (Zen 2/3's kernels), "avxvnni" the avx2 level with AVX-VNNI.
  if (const char* cap = std::getenv("WEFT_MAX_ISA")) {
    const bool vnni = std::string_view(cap) == "avxvnni";
    const std::optional<Isa> max = vnni ? std::optional<Isa>(Isa::Avx2) : parse_isa(cap);
    if (max && *max < Isa::Avx512) f.avx512 = false;
    if (max && *max < Isa::Avx512 && !vnni) f.avx_vnni = false;
    if (max && *max < Isa::Avx2) f.avx2 = false;
    if (max) tiles = false;  // every level name is below AMX
  }
  f.avx_vnni = f.avx_vnni && f.avx2;
  // Asked only when it would be used: the grant makes every context switch save 8 KiB more.
  f.amx = f.avx512 && tiles && request_amx_state();
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

constexpr const char* kIsaNames[] = {"ref", "avx2", "avx512"};
static_assert(std::size(kIsaNames) == kIsaCount);

const char* isa_name(Isa isa) { return kIsaNames[static_cast<int>(isa)]; }

std::optional<Isa> parse_isa(std::string_view name) {
  for (int i = 0; i < kIsaCount; ++i)
    if (name == kIsaNames[i]) return static_cast<Isa>(i);
  return std::nullopt;
}

Isa detected_isa() {
  static const Isa isa = cpu_features().avx512 ? Isa::Avx512 : cpu_features().avx2 ? Isa::Avx2 : Isa::Scalar;
  return isa;
}

bool isa_supported(Isa isa) { return isa <= detected_isa(); }

std::string kernel_summary() {
  const CpuFeatures& f = cpu_features();
  std::string s = isa_name(detected_isa());
  if (f.amx) s += " + amx tiles";
  if (f.avx_vnni && detected_isa() == Isa::Avx2) s += " + avx-vnni";
  if (f.l2_prefetch > 0 && detected_isa() != Isa::Scalar) s += ", L2 prefetch " + std::to_string(f.l2_prefetch) + " B";
  return s;
}

}  // namespace weft::kernels
