#include "core/dtype.h"

#include "core/error.h"

#include <array>

namespace weft {
namespace {

struct Entry {
  DType type;
  DTypeTraits traits;
};

// Block layouts from ggml-common.h: sizes are what the GGUF data section holds.
constexpr std::array kTable = {
    Entry{DType::F32, {"f32", 1, 4, true}},
    Entry{DType::F16, {"f16", 1, 2, true}},
    Entry{DType::Q4_0, {"q4_0", 32, 18, true}},
    Entry{DType::Q4_1, {"q4_1", 32, 20, true}},
    Entry{DType::Q5_0, {"q5_0", 32, 22, true}},
    Entry{DType::Q5_1, {"q5_1", 32, 24, true}},
    Entry{DType::Q8_0, {"q8_0", 32, 34, true}},
    Entry{DType::Q8_1, {"q8_1", 32, 36, false}},
    Entry{DType::Q2_K, {"q2_k", 256, 84, true}},
    Entry{DType::Q3_K, {"q3_k", 256, 110, true}},
    Entry{DType::Q4_K, {"q4_k", 256, 144, true}},
    Entry{DType::Q5_K, {"q5_k", 256, 176, true}},
    Entry{DType::Q6_K, {"q6_k", 256, 210, true}},
    Entry{DType::Q8_K, {"q8_k", 256, 292, true}},
    Entry{DType::IQ4_NL, {"iq4_nl", 32, 18, true}},
    Entry{DType::IQ4_XS, {"iq4_xs", 256, 136, true}},
    Entry{DType::MXFP4, {"mxfp4", 32, 17, true}},
    // Known so that a file of them is refused by name.
    Entry{DType::IQ2_XXS, {"iq2_xxs", 256, 66, false}},
    Entry{DType::IQ2_XS, {"iq2_xs", 256, 74, false}},
    Entry{DType::IQ3_XXS, {"iq3_xxs", 256, 98, false}},
    Entry{DType::IQ1_S, {"iq1_s", 256, 50, false}},
    Entry{DType::IQ3_S, {"iq3_s", 256, 110, false}},
    Entry{DType::IQ2_S, {"iq2_s", 256, 82, false}},
    Entry{DType::IQ1_M, {"iq1_m", 256, 56, false}},
    Entry{DType::I8, {"i8", 1, 1, false}},
    Entry{DType::I16, {"i16", 1, 2, false}},
    Entry{DType::I32, {"i32", 1, 4, false}},
    Entry{DType::I64, {"i64", 1, 8, false}},
    Entry{DType::F64, {"f64", 1, 8, false}},
    Entry{DType::BF16, {"bf16", 1, 2, true}},
};

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  for (const auto& e : kTable)
    if (static_cast<uint32_t>(e.type) == id) return e.traits;
  return std::nullopt;
}

const DTypeTraits& traits(DType t) {
  for (const auto& e : kTable)
    if (e.type == t) return e.traits;
  fail("dtype", "unknown dtype id {}", static_cast<uint32_t>(t));
}

size_t row_bytes(DType t, int64_t n) {
  const auto& tr = traits(t);
  WEFT_ASSERT(n >= 0 && n % tr.block_size == 0);
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kTable)
    if (e.traits.name == name) return e.type;
  return std::nullopt;
}

}  // namespace weft
