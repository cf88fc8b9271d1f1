// LDTILECFG's 64-byte operand, palette 1: the shape of each of the 8 AMX tiles, shared by the
// prompt GEMM (gemm_amx.cpp) and the tile peak microbenchmark.
#pragma once

#include <cstdint>

namespace weft::kernels {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace weft::kernels
