// Element type of collectives on the wire: what every Group backend moves.
#pragma once

#include <string_view>

namespace weft::parallel {

// Reduction always accumulates in f32; bf16/f16 halve the bytes moved at the cost of rounding each
// partial sum once.
enum class WireType { F32, BF16, F16 };
std::string_view wire_type_name(WireType w);

}  // namespace weft::parallel
