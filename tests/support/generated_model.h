// Test helper: a generated model held in memory with its tokenizer, and options for engines of
// in-process CPU devices (one thread each) on it or on any other file.
#pragma once

#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "tools/gen_model.h"

#include <memory>
#include <string>
#include <vector>

namespace weft::test_support {

struct GeneratedModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<tokenizer::Tokenizer> tok;

  explicit GeneratedModel(const tools::GenModelOptions& o = {})
      : bytes(tools::generate_model_bytes(o)),
        file(gguf::File::parse(bytes.data(), bytes.size(), "generated")),
        tok(tokenizer::Tokenizer::from_gguf(*file)) {}
};

// Qwen 3.5's tiny shape: 3 Gated DeltaNet layers and a full one, 2 key heads and 4 value heads.
// Heads 32 wide fill q8_0's blocks, so its key heads split one by one (at 16, two make a block).
// qwen35moe and qwen3next: the same with experts.
inline tools::GenModelOptions qwen35(const std::string& type = "f32", const std::string& arch = "qwen35") {
  tools::GenModelOptions o;
  o.arch = arch;
  o.preset = arch == "qwen35" ? "tiny" : "tiny-moe";
  o.type = type;
  o.seed = 7;
  o.overrides.lin_head_dim = 32;
  return o;
}

// n_devices CPU devices of one thread (tensor split when more than one), n_seq slots of n_ctx.
inline runtime::EngineOptions cpu_engine_options(int n_devices, int n_seq, int n_ctx, int n_batch = 32) {
  runtime::EngineOptions o;
  for (int i = 0; i < n_devices; ++i) o.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
  o.mode = n_devices > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  o.n_seq = n_seq;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  return o;
}

}  // namespace weft::test_support
