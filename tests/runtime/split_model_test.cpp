// A split model (llama-gguf-split's parts, here written by gen-model) runs as the file it was cut
// from: the same greedy tokens and the same logits on one device and on three, copied onto the
// devices or read from the parts' mappings (--mmap).
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace weft::runtime {
namespace {

EngineOptions on_cpus(int n, bool map_weights) {
  EngineOptions o;
  o.mode = n == 1 ? parallel::SplitMode::None : parallel::SplitMode::Tensor;
  for (int i = 0; i < n; ++i) o.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
  o.n_ctx = 128;
  o.n_batch = 8;
  o.map_weights = map_weights;
  return o;
}

std::vector<Token> greedy(const gguf::File& f, EngineOptions o, const std::vector<Token>& prompt) {
  Engine e(f, std::move(o));
  model::SamplingParams p;
  p.temp = 0;
  return runtime::generate(e, nullptr, prompt, 32, p).generated;
}

TEST(SplitModel, RunsAsTheWholeFileOnOneAndThreeDevices) {
  const std::string dir = testing::TempDir() + "/weft_split_model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  tools::GenModelOptions o;
  o.type = "q8_0";
  o.seed = 5;
  o.path = dir + "/whole.gguf";
  tools::generate_model(o);
  o.path = dir + "/m.gguf";
  o.split_max_tensors = 4;
  const std::vector<std::string> parts = tools::generate_model(o);
  ASSERT_GE(parts.size(), 4u);

  const auto whole = gguf::File::open(dir + "/whole.gguf");
  const auto split = gguf::File::open(parts[0]);
  ASSERT_EQ(split->part_paths(), parts);
  const std::vector<Token> prompt = {1, 17, 42, 99, 7, 3};
  const std::vector<Token> ref = greedy(*whole, on_cpus(1, false), prompt);
  ASSERT_EQ(ref.size(), 32u);
  for (int n : {1, 3}) {
    for (bool map : {false, true}) {
      EXPECT_EQ(greedy(*split, on_cpus(n, map), prompt), ref) << n << " devices, mmap " << map;
      // Same bytes on the same devices: identical logits, not merely close.
      Engine a(*whole, on_cpus(n, map)), b(*split, on_cpus(n, map));
      EXPECT_EQ(a.eval_logits(prompt), b.eval_logits(prompt)) << n << " devices, mmap " << map;
    }
  }
}

}  // namespace
}  // namespace weft::runtime
