// Internal to the grid kernels (iquants.h): ggml's blocks and grids, shared by the reference and the
// SIMD files.
#pragma once

#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/isa.h"
#include "kernels/quants.h"

#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>

namespace weft::kernels::iquants {

// ggml's kvalues_iq4nl: the level of each nibble, ascending.
inline constexpr int8_t kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// ggml's kvalues_mxfp4: E2M1's values doubled (so that they are integers), bit 3 of a nibble its sign.
inline constexpr int8_t kGridMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// The levels of a type's nibbles (IQ4_NL and IQ4_XS share kvalues_iq4nl).
template <DType kType>
inline constexpr const int8_t* kLevels = kType == DType::MXFP4 ? kGridMxfp4 : kGrid;

// What the panel GEMMs add to a type's levels to make them the unsigned bytes vpdpbusd takes (the
// offset gemm_q8.h takes off through the activations' sums): 128 for kvalues_iq4nl (-127 .. 113),
// 12 for kvalues_mxfp4, whose levels + 12 (0 .. 24) then add up in AVX2's int16 sums as the legacy
// types' do, without the sign trick that IQ4's levels + 128 need.
constexpr int grid_bias(DType t) { return t == DType::MXFP4 ? 12 : 128; }
template <DType kType>
inline constexpr std::array<uint8_t, 16> kGridU8 = [] {
  std::array<uint8_t, 16> a{};
  for (int i = 0; i < 16; ++i) a[i] = static_cast<uint8_t>(kLevels<kType>[i] + grid_bias(kType));
  return a;
}();

constexpr int kQK4NL = 32;  // IQ4_NL's and MXFP4's blocks
constexpr int kQKXS = 256;

// Value j < 16 of the block is grid[qs[j] & 0xF] * d, value j + 16 grid[qs[j] >> 4] * d (Q4_0's pairing).
struct BlockIQ4NL {
  uint16_t d;
  uint8_t qs[kQK4NL / 2];
};

// IQ4_NL's block with kvalues_mxfp4 and, for the fp16 d, an E8M0 exponent e: d = 2^(e - 128)
// (e8m0_half: ggml halves 2^(e - 127) for the doubled grid).
struct BlockMXFP4 {
  uint8_t e;
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
static_assert(sizeof(BlockIQ4NL) == 18 && sizeof(BlockMXFP4) == 17 && sizeof(BlockIQ4XS) == 136,
              "GGUF block sizes (dtype.cpp)");

inline int iq4xs_scale(const BlockIQ4XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e - 128) built as float bits, the normal (e - 1) << 23 or, for
// e < 2, the subnormals 2^-128 and 2^-127. e = 255 is 2^127 (ggml reads no NaN).
inline float e8m0_half(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23);
}

// The two 32-value grid blocks: their type and their scale as a float.
template <class Block>
constexpr DType kBlockType = std::is_same_v<Block, BlockMXFP4> ? DType::MXFP4 : DType::IQ4_NL;
inline float block_scale(const BlockIQ4NL& b) { return fp16_to_f32(b.d); }
inline float block_scale(const BlockMXFP4& b) { return e8m0_half(b.e); }

// A type's dot kernels at one level (iquants.h's vec_dot and rows_dot).
struct DotKernels {
  VecDotFn vec_dot;
  RowsDotFn rows_dot;
};
// The table of level I (iquants_ref.cpp): these dots, the scalar dequantizers, and the Q8_0 / Q8_K
// activation quantizers of that level, taken from the families that own them.
template <Isa I>
std::array<TypeKernels, 3> make_table(DotKernels iq4_nl, DotKernels iq4_xs, DotKernels mxfp4);

}  // namespace weft::kernels::iquants
