#include "parallel/wire_type.h"

#include "core/error.h"

namespace weft::parallel {

std::string_view wire_type_name(WireType w) {
  switch (w) {
    case WireType::F32: return "f32";
    case WireType::BF16: return "bf16";
    case WireType::F16: return "f16";
  }
  fail("parallel", "unknown wire type {}", static_cast<int>(w));
}

size_t wire_type_bytes(WireType w) {
  switch (w) {
    case WireType::F32: return 4;
    case WireType::BF16:
    case WireType::F16: return 2;
  }
  fail("parallel", "unknown wire type {}", static_cast<int>(w));
}

}  // namespace weft::parallel
