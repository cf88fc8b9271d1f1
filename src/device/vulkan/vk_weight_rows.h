// How the matmul shaders find a weight row in device memory. The 32-value legacy types (Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0) are stored split: a row's block headers (scales, Q5's high bits) first,
// then its quants from a 16-byte boundary, so that a block's quants are one or two 16-byte loads
// (a GPU reads 18-byte blocks two bytes at a time otherwise). Every other type keeps ggml's rows.
// Splitting moves bytes, not values: the shaders compute exactly what they did on ggml's blocks.
#pragma once

#include "core/dtype.h"

#include <cstdint>

namespace weft::device::vk {

// Whether t's rows are stored split (header bytes, then quants) on the device.
bool split_rows(DType t);
// Bytes one row of `cols` values of type t takes on the device (a multiple of 16 where split).
uint64_t device_row_bytes(DType t, int64_t cols);
// Writes `rows` rows of ggml blocks (src, src_stride bytes apart) into dst in the device's layout,
// device_row_bytes(t, cols) apart.
void to_device_rows(DType t, int64_t cols, const uint8_t* src, uint64_t src_stride, int64_t rows, uint8_t* dst);

}  // namespace weft::device::vk
