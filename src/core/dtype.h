// Element types, numbered exactly as ggml_type so GGUF files map one to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,  // the IQ types weft reads no further than their name (dtype.cpp)
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,  // OCP microscaling FP4 (gpt-oss's experts): E2M1 values, one E8M0 exponent per 32
};

struct DTypeTraits {
  std::string_view name;  // as ggml prints it: "q4_0", "f16"
  int64_t block_size;     // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
  bool supported;         // weft has kernels for it
};

// Traits of a GGUF type id; nullopt for ids weft does not know at all.
std::optional<DTypeTraits> dtype_traits(uint32_t ggml_type_id);
const DTypeTraits& traits(DType t);  // for a known DType

inline std::string_view dtype_name(DType t) { return traits(t).name; }
inline int64_t block_size(DType t) { return traits(t).block_size; }
// Bytes of one row of n elements; n must be a multiple of the block size.
size_t row_bytes(DType t, int64_t n);
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace weft
