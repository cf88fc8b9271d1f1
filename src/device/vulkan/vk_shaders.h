// The compute shaders (shaders/*.comp), compiled by glslc at build time and embedded: SPIR-V by
// name, one name per variant ("matmul_q4_0", "attention_f16"); empty when there is none.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace weft::device::vk {

std::span<const uint32_t> shader_spirv(std::string_view name);

}  // namespace weft::device::vk
