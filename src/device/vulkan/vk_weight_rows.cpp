#include "device/vulkan/vk_weight_rows.h"

#include "core/error.h"

#include <cstring>

namespace weft::device::vk {
namespace {

// The quants' bytes in a block of a split type (the rest, first in the block, is its header).
uint64_t quant_bytes(DType t) { return t == DType::Q8_0 ? 32 : 16; }
uint64_t align16(uint64_t v) { return (v + 15) & ~uint64_t{15}; }

}  // namespace

bool split_rows(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}

uint64_t device_row_bytes(DType t, int64_t cols) {
  if (!split_rows(t)) return row_bytes(t, cols);
  const uint64_t nb = static_cast<uint64_t>(cols) / block_size(t), qb = quant_bytes(t);
  return align16(nb * (traits(t).block_bytes - qb)) + nb * qb;
}

void to_device_rows(DType t, int64_t cols, const uint8_t* src, uint64_t src_stride, int64_t rows, uint8_t* dst) {
  const uint64_t out = device_row_bytes(t, cols);
  if (!split_rows(t)) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * out, src + r * src_stride, row_bytes(t, cols));
    return;
  }
  const uint64_t nb = static_cast<uint64_t>(cols) / block_size(t), qb = quant_bytes(t), bb = traits(t).block_bytes,
                 hb = bb - qb, quants = align16(nb * hb);
  WEFT_ASSERT(static_cast<int64_t>(nb * block_size(t)) == cols);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + r * src_stride;
    uint8_t* d = dst + r * out;
    std::memset(d + nb * hb, 0, quants - nb * hb);  // the padding, so that uploads are deterministic
    for (uint64_t b = 0; b < nb; ++b) {
      std::memcpy(d + b * hb, s + b * bb, hb);
      std::memcpy(d + quants + b * qb, s + b * bb + hb, qb);
    }
  }
}

}  // namespace weft::device::vk
