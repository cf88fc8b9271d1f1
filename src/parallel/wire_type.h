// Element type of collectives on the wire: what every Group backend moves and what the plan's
// collective sizes are counted in. Apart from group.h so that the plan (plain data) can size its
// collectives without the Group interface.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::parallel {

// Reduction always accumulates in f32; bf16/f16 halve the bytes moved at the cost of rounding each
// partial sum once.
enum class WireType { F32, BF16, F16 };
std::string_view wire_type_name(WireType w);
size_t wire_type_bytes(WireType w);  // bytes of one element on the wire

}  // namespace weft::parallel
