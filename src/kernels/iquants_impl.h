// Internal to the IQ4 kernels (iquants.h): ggml's blocks and grid, shared by the reference and the
// SIMD files.
#pragma once

#include "kernels/isa.h"
#include "kernels/quants.h"

#include <array>
#include <cstdint>

namespace weft::kernels::iquants {

// ggml's kvalues_iq4nl: the level of each nibble, ascending.
inline constexpr int8_t kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// The levels + 128: the unsigned bytes the panel GEMMs read (the -128 applied apart).
inline constexpr std::array<uint8_t, 16> kGridU8 = [] {
  std::array<uint8_t, 16> a{};
  for (int i = 0; i < 16; ++i) a[i] = static_cast<uint8_t>(kGrid[i] + 128);
  return a;
}();

constexpr int kQK4NL = 32;
constexpr int kQKXS = 256;

// Value j < 16 of the block is grid[qs[j] & 0xF] * d, value j + 16 grid[qs[j] >> 4] * d (Q4_0's pairing).
struct BlockIQ4NL {
  uint16_t d;
  uint8_t qs[kQK4NL / 2];
};

// Sub-block ib (values 32 ib .. 32 ib + 31) has scale d * (ls - 32), ls = iq4xs_scale(ib), and its
// nibbles at qs + 16 ib paired as IQ4_NL's.
struct BlockIQ4XS {
  uint16_t d;
  uint16_t scales_h;             // bits 2ib .. 2ib + 1: the top two bits of ls of sub-block ib
  uint8_t scales_l[kQKXS / 64];  // nibble ib % 2 of byte ib / 2: its low four bits
  uint8_t qs[kQKXS / 2];
};
static_assert(sizeof(BlockIQ4NL) == 18 && sizeof(BlockIQ4XS) == 136, "GGUF block sizes (dtype.cpp)");

inline int iq4xs_scale(const BlockIQ4XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

// The table of level I (iquants_ref.cpp): these dots, the scalar dequantizers, and the Q8_0 / Q8_K
// activation quantizers of that level, taken from the families that own them.
template <Isa I>
std::array<TypeKernels, 2> make_table(VecDotFn nl_dot, RowsDotFn nl_rows, VecDotFn xs_dot, RowsDotFn xs_rows);

}  // namespace weft::kernels::iquants
