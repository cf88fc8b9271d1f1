#include "core/dtype.h"
#include "core/error.h"
#include "core/fp16.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace weft {
namespace {

TEST(DType, BlockLayoutsMatchGgml) {
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 32), 34u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(row_bytes(DType::BF16, 3), 6u);
  EXPECT_ERROR(row_bytes(DType::Q4_0, 33), "n % tr.block_size == 0 failed");
  EXPECT_FALSE(dtype_traits(4).has_value());  // ggml's removed Q4_2
  EXPECT_EQ(dtype_from_name("q5_1"), DType::Q5_1);
  EXPECT_FALSE(dtype_from_name("q9_9").has_value());
}

TEST(Fp16, RoundTripsAndRoundsToNearestEven) {
  for (float f : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(fp16_to_f32(f32_to_fp16(f)), f) << f;
  EXPECT_EQ(f32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_TRUE(std::isinf(fp16_to_f32(f32_to_fp16(1e6f))));
  EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.140625f)), 3.140625f);
}

}  // namespace
}  // namespace weft
