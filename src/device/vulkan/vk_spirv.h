// What a compute shader's SPIR-V says about its storage buffers, read where its pipeline is made.
#pragma once

#include <cstdint>
#include <span>

namespace weft::device::vk {

// The bindings (bit N: binding N of set 0) of storage buffers the shader may write: those it
// declares but for the ones whose variable or every member of whose block is decorated NonWritable
// (GLSL's `readonly`). A binding the code does not declare (a variant that reads no such buffer)
// is never touched. Code this reader does not understand writes everything: a barrier too many,
// never one too few.
uint64_t written_bindings(std::span<const uint32_t> code);

}  // namespace weft::device::vk
