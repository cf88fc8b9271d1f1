// Gemma 3 and Phi-3 under every split: the greedy tokens of one device and its logits within
// kLogitRelTol, for in-process devices and worker processes. What these families add to the
// llama graph is checked across the split: Gemma's post-norms (each forces its all-reduce before
// it, so a layer still has two), GELU gate, sliding-window layers with their own RoPE base; Phi-3's
// fused q/k/v and gate/up tensors, whose every segment the planner cuts by heads or FFN rows alone.
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/parallel_equality.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace weft::runtime {
namespace {

using equality::configs;
using equality::expect_logits_match;
using equality::greedy;
using equality::options;
using equality::single;
using equality::some_prompt;
using parallel::SplitMode;

struct FamilyCase {
  std::string arch, type;
};

tools::GenModelOptions model_options(const FamilyCase& k) {
  tools::GenModelOptions o;
  o.arch = k.arch;
  o.type = k.type;
  o.seed = 7;
  o.sliding_window = 6;  // gemma3: the prompt and the generated tokens run far past it
  return o;
}

class FamilySplits : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(FamilySplits, GreedyTokensAndLogitsMatchEveryConfig) {
  const auto bytes = tools::generate_model_bytes(model_options(GetParam()));
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "family");
  const auto prompt = some_prompt(320, 21);
  const auto ref = greedy(*f, single(), prompt, 48);
  ASSERT_EQ(ref.size(), 48u);
  for (const auto& c : configs()) {
    EXPECT_EQ(greedy(*f, options(c), prompt, 48), ref) << c.name;
    expect_logits_match(*f, c, prompt);
  }
  const Engine tp(*f, options(configs()[2]));  // Megatron's two all-reduces per layer, nothing gathered
  EXPECT_TRUE(tp.plan().fallbacks.empty());
  for (int l = 0; l < 2; ++l) EXPECT_EQ(tp.plan().collectives_in_layer(l), 2) << "layer " << l;
}

INSTANTIATE_TEST_SUITE_P(Archs, FamilySplits,
                         ::testing::Values(FamilyCase{"gemma3", "f32"}, FamilyCase{"gemma3", "q8_0"},
                                           FamilyCase{"gemma3", "q4_k_m"}, FamilyCase{"phi3", "f32"},
                                           FamilyCase{"phi3", "q4_0"}, FamilyCase{"phi3", "bf16"}),
                         [](const auto& p) { return p.param.arch + "_" + p.param.type; });

// A worker streamed its slices (the fused tensors' segments among them) and one reading its own
// copy, beside a local device.
TEST(FamilyRemote, WorkerProcessesMatchOneDevice) {
  const std::string dir = ::testing::TempDir() + "/weft_family_remote";
  std::filesystem::create_directories(dir);
  for (const FamilyCase k : {FamilyCase{"gemma3", "q8_0"}, FamilyCase{"phi3", "q4_0"}}) {
    tools::GenModelOptions o = model_options(k);
    o.path = dir + "/" + k.arch + ".gguf";
    tools::generate_model(o);
    auto f = gguf::File::open(o.path);
    const auto prompt = some_prompt(320, 15);
    const auto ref = greedy(*f, single(), prompt, 24);
    using device::remote::testing_support::Worker;
    Worker streamed, own_copy({"--model-dir", dir});
    EngineOptions mix = options({"remote", SplitMode::Tensor, {1, 2, 1}});
    mix.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, streamed.address()};
    mix.devices[2] = {device::DeviceSpec::Kind::Remote, 1, -1, own_copy.address()};
    EXPECT_EQ(greedy(*f, mix, prompt, 24), ref) << k.arch;
    EngineOptions layers = options({"remote layers", SplitMode::Layer, {1, 1}});
    layers.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, streamed.address()};
    expect_logits_match(*f, layers, k.arch + " layer split with a worker", prompt);
  }
}

}  // namespace
}  // namespace weft::runtime
