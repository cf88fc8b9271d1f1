// Test helper: the model configuration a GGUF file's bytes describe.
#pragma once

#include "gguf/gguf_reader.h"
#include "model/model_config.h"

#include <cstdint>
#include <vector>

namespace weft::test_support {

inline model::ModelConfig config_of(const std::vector<uint8_t>& bytes) {
  auto f = gguf::File::parse(bytes.data(), bytes.size());
  return model::read_config(*f);
}

}  // namespace weft::test_support
