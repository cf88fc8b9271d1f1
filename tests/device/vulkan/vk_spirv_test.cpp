// The storage buffers a shader writes, as its SPIR-V declares them (GLSL's readonly / writeonly):
// what the Gpu orders dispatches by.
#include "device/vulkan/vk_spirv.h"
#include "device/vulkan/vk_shaders.h"

#include <gtest/gtest.h>

#include <vector>

namespace weft::device::vk {
namespace {

TEST(VkSpirv, WrittenBindingsFollowTheShadersDeclarations) {
  // rms_norm: x and w readonly, y writeonly.
  EXPECT_EQ(written_bindings(shader_spirv("rms_norm")), 0b100u);
  // quantize: x readonly, the blocks, scales and sums writeonly.
  EXPECT_EQ(written_bindings(shader_spirv("quantize")), 0b1110u);
  // matmul: the weights, the quantized input, the routes and biases readonly; y read and written
  // (the expert sums add to it); the float input and the sums Q4_0 has none of are not declared.
  EXPECT_EQ(written_bindings(shader_spirv("matmul_q4_0")), 1u << 5);
  // delta_net: the state read and written, y writeonly, the rest readonly.
  EXPECT_EQ(written_bindings(shader_spirv("delta_net")), (1u << 6) | (1u << 7));
}

TEST(VkSpirv, CodeItCannotReadCountsAsWritingEverything) {
  EXPECT_EQ(written_bindings({}), ~uint64_t{0});
  const std::vector<uint32_t> not_spirv(16, 0x12345678);
  EXPECT_EQ(written_bindings(not_spirv), ~uint64_t{0});
  std::vector<uint32_t> truncated(shader_spirv("rms_norm").begin(), shader_spirv("rms_norm").end());
  truncated.resize(truncated.size() / 2);
  truncated.back() = 0xffff0000u | 71;  // an instruction that claims more words than are left
  EXPECT_EQ(written_bindings(truncated), ~uint64_t{0});
}

}  // namespace
}  // namespace weft::device::vk
