// Gemma 3, Gemma 4 and Phi-3 under every split: the greedy tokens of one device and its logits within
// kLogitRelTol, for in-process devices and worker processes. What these families add to the
// llama graph is checked across the split: Gemma's post-norms (each forces its all-reduce before
// it, so a layer still has two), GELU gate, sliding-window layers with their own RoPE base; Phi-3's
// fused q/k/v and gate/up tensors, whose every segment the planner cuts by heads or FFN rows alone;
// Gemma 4's K projection read as V on its global layers and its V norm, cut by KV heads with K.
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "parallel/memory_fit.h"
#include "runtime/engine.h"
#include "runtime/parallel_equality.h"
#include "support/edited_model.h"
#include "support/expect_error.h"
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
  int64_t head_dim = 0;  // Gemma 3's heads are wider than n_embd / n_head
  // Gemma 4's released shape: the global layers' heads (head_dim) wider than the sliding-window
  // layers' (head_dim_swa) and fewer KV heads (n_head_kv against n_head_kv_swa).
  int64_t head_dim_swa = 0, n_head_kv = 0, n_head_kv_swa = 0;
  // Gemma 4 E2B's: per-layer inputs, and the last 2 of 4 layers (one of each kind) over the
  // caches of the two before them, their FFN twice as wide.
  bool e2b = false;
};
const FamilyCase kGemma4Heads{"gemma4", "q8_0", 32, 16, 1, 2};
const FamilyCase kGemma4E2b{"gemma4", "q8_0", 32, 16, 1, 2, true};

tools::GenModelOptions model_options(const FamilyCase& k) {
  tools::GenModelOptions o;
  o.arch = k.arch;
  o.type = k.type;
  o.seed = 7;
  o.sliding_window = 6;  // gemma3: the prompt and the generated tokens run far past it
  o.overrides.head_dim = k.head_dim;
  o.overrides.head_dim_swa = k.head_dim_swa;
  o.overrides.n_head_kv = k.n_head_kv;
  o.overrides.n_head_kv_swa = k.n_head_kv_swa;
  if (k.e2b) {
    o.overrides.n_layer = 4;
    o.overrides.n_embd_per_layer = 16;
    o.overrides.n_kv_shared = 2;
  }
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
  for (int l = 0; l < tp.plan().devices[0].dims.n_layer; ++l)
    EXPECT_EQ(tp.plan().collectives_in_layer(l), 2) << "layer " << l;
}

INSTANTIATE_TEST_SUITE_P(
    Archs, FamilySplits,
    ::testing::Values(FamilyCase{"gemma3", "f32"}, FamilyCase{"gemma3", "q8_0"}, FamilyCase{"gemma3", "q4_k_m"},
                      FamilyCase{"gemma3", "q8_0", 32}, FamilyCase{"gemma4", "f32"}, FamilyCase{"gemma4", "q8_0"},
                      FamilyCase{"gemma4", "q4_k_m"}, FamilyCase{"gemma4", "f16", 32}, kGemma4Heads,
                      FamilyCase{"gemma4", "f32", 32, 16, 1, 2}, kGemma4E2b,
                      FamilyCase{"gemma4", "f32", 32, 16, 1, 2, true}, FamilyCase{"gemma4", "q4_k_m", 0, 0, 0, 0, true},
                      FamilyCase{"phi3", "f32"}, FamilyCase{"phi3", "q4_0"}, FamilyCase{"phi3", "bf16"}),
    [](const auto& p) {
      const FamilyCase& k = p.param;
      return k.arch + "_" + k.type + (k.head_dim ? "_hd" + std::to_string(k.head_dim) : "") +
             (k.head_dim_swa ? "_swa" + std::to_string(k.head_dim_swa) + "x" + std::to_string(k.n_head_kv_swa) : "") +
             (k.e2b ? "_e2b" : "");
    });

// Gemma 4 E2B's layout cut by layers: of 5 layers the last attends over layer 2's cache, so a
// boundary past layer 2 moves down to it; each device computes the per-layer inputs of its own
// layers from the tokens, the second one (in process, or a worker process) its own embedding rows.
TEST(FamilyLayerSplit, Gemma4E2bDevicesComputeTheirOwnPerLayerInputs) {
  tools::GenModelOptions o = model_options(kGemma4E2b);
  o.overrides.n_layer = 5;
  o.overrides.n_kv_shared = 1;
  const std::string dir = ::testing::TempDir() + "/weft_family_layers";
  std::filesystem::create_directories(dir);
  o.path = dir + "/e2b-5.gguf";
  tools::generate_model(o);
  auto f = gguf::File::open(o.path);
  const auto prompt = some_prompt(320, 21);
  const auto ref = greedy(*f, single(), prompt, 32);
  const Engine two(*f, options({"layer2", SplitMode::Layer, {1, 1}}));
  EXPECT_EQ(two.plan().layers[0].end, 2) << "the boundary at layer 2, below the shared cache's reader";
  for (const auto& c : {configs()[9], configs()[10]}) {
    EXPECT_EQ(greedy(*f, options(c), prompt, 32), ref) << c.name;
    expect_logits_match(*f, c, prompt);
  }
  using device::remote::testing_support::Worker;
  Worker worker;
  EngineOptions layers = options({"remote layers", SplitMode::Layer, {1, 1}});
  layers.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, worker.address()};
  EXPECT_EQ(greedy(*f, layers, prompt, 32), ref) << "a worker's layers";
}

// Heads wider than the CPU attention kernel takes are an error as the device loads, not a throw
// on a pool thread mid-step (which ended the process).
TEST(FamilyLoad, HeadsWiderThanTheAttentionKernelAreRefused) {
  tools::GenModelOptions o;
  o.arch = "qwen3";
  o.type = "f32";
  o.overrides.n_head = o.overrides.n_head_kv = 1;
  o.overrides.head_dim = 16;
  constexpr int64_t kWide = 1024;
  test_support::Edit e;
  e.keys = {{"qwen3.attention.key_length", kWide}, {"qwen3.attention.value_length", kWide}};
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q.weight", "attn_k.weight", "attn_v.weight"}) e.tensors[b + m] = {{64, kWide}};
    e.tensors[b + "attn_output.weight"] = {{kWide, 64}};
    for (const char* n : {"attn_q_norm.weight", "attn_k_norm.weight"}) e.tensors[b + n] = {{kWide}};
  }
  const auto bytes = test_support::edited(tools::generate_model_bytes(o), e);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "wide heads");
  EngineOptions two = single();
  two.devices[0].threads = 2;
  EXPECT_ERROR(Engine(*f, two), "attention: heads 1024 wide, the attention kernel takes at most 576");
}

// A worker streamed its slices (the fused tensors' segments among them) and one reading its own
// copy, beside a local device.
TEST(FamilyRemote, WorkerProcessesMatchOneDevice) {
  const std::string dir = ::testing::TempDir() + "/weft_family_remote";
  std::filesystem::create_directories(dir);
  for (const FamilyCase& k : {FamilyCase{"gemma3", "q8_0"}, FamilyCase{"gemma4", "q8_0"}, kGemma4Heads, kGemma4E2b,
                              FamilyCase{"phi3", "q4_0"}}) {
    tools::GenModelOptions o = model_options(k);
    o.path = dir + "/" + k.arch + (k.head_dim_swa ? "-heads" : "") + (k.e2b ? "-e2b" : "") + ".gguf";
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

// Gemma's sliding-window layers keep a few rows per slot (graph/kv_window.h) once the context is
// long: the same tokens and logits as a cache of the whole context, across many moves of the
// window, for one device, a tensor split and a layer split.
TEST(SlidingWindowCache, MatchesAWholeContextCache) {
  tools::GenModelOptions o = model_options({"gemma3", "f32"});
  o.sliding_window = 5;
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "window");
  const auto prompt = some_prompt(320, 37);
  auto whole = single(DType::F32);
  whole.n_ctx = 128;
  whole.n_batch = 64;  // 2 x (5 + 64) rows: the whole context
  const auto ref = greedy(*f, whole, prompt, 80);
  for (const auto& c : {configs()[0], configs()[3], configs()[9]}) {
    auto windowed = options(c, DType::F32);
    windowed.n_ctx = 128;
    windowed.n_batch = 4;  // 2 x (5 + 4) = 18 rows of 128: the window moves every few tokens
    const Engine e(*f, windowed);
    ASSERT_LT(parallel::kv_cache_bytes(e.plan().devices[0], {128, DType::F32, DType::F32, 1, 4}),
              parallel::kv_cache_bytes(Engine(*f, whole).plan().devices[0], {128, DType::F32, DType::F32, 1, 4}))
        << "the plan counts the windowed layers' rows";
    EXPECT_EQ(greedy(*f, windowed, prompt, 80), ref) << c.name;
    expect_logits_match(*f, windowed, c.name + " windowed", prompt, DType::F32);
  }
}

// Three sequences in three slots of one engine, stepped together in small steps, so that each
// slot's window moves at its own moments: each gives the tokens it gives alone.
TEST(SlidingWindowCache, SlotsMoveTheirWindowsApart) {
  tools::GenModelOptions o = model_options({"gemma3", "q8_0"});
  o.sliding_window = 5;
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "window");
  auto eo = single(DType::F32);
  eo.n_ctx = 128;
  eo.n_batch = 8;  // 2 x (5 + 8) = 26 rows per slot
  const std::vector<std::vector<Token>> prompts = {some_prompt(320, 3), some_prompt(320, 11), some_prompt(320, 19)};
  constexpr int kGen = 40;
  std::vector<std::vector<Token>> alone;
  for (const auto& p : prompts) alone.push_back(greedy(*f, eo, p, kGen));
  eo.n_seq = 3;
  Engine e(*f, eo);
  model::SamplingParams greedy_p;
  greedy_p.temp = 0;
  std::vector<std::vector<Token>> got(3), feed(3);
  std::vector<size_t> fed(3, 0);
  for (int steps = 0; steps < 200 && (got[0].size() < kGen || got[1].size() < kGen || got[2].size() < kGen); ++steps) {
    std::vector<SeqStep> batch;
    for (int32_t q = 0; q < 3; ++q) {
      if (got[q].size() >= kGen) continue;
      if (fed[q] < prompts[q].size()) {  // the prompt two tokens a step
        const size_t n = std::min<size_t>(2, prompts[q].size() - fed[q]);
        feed[q].assign(prompts[q].begin() + fed[q], prompts[q].begin() + fed[q] + n);
        fed[q] += n;
      } else {
        feed[q] = {got[q].back()};
      }
      SeqStep st;
      st.seq = q;
      st.tokens = feed[q];
      st.sample = fed[q] == prompts[q].size();
      st.sampling = greedy_p;
      batch.push_back(st);
    }
    const auto out = e.step_batch(batch);
    for (size_t k = 0; k < batch.size(); ++k)
      if (batch[k].sample) got[batch[k].seq].push_back(out[k].token);
  }
  for (int q = 0; q < 3; ++q) EXPECT_EQ(got[q], alone[q]) << "slot " << q;
}

// A context of 8x the window costs the window's rows on those layers, not the context.
TEST(SlidingWindowCache, ItsKvMemoryFollowsTheWindow) {
  tools::GenModelOptions o = model_options({"gemma3", "f32"});
  o.sliding_window = 64;
  o.n_ctx = 4096;
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "window");
  auto eo = single(DType::F16);
  eo.n_ctx = 512;  // 8 windows
  eo.n_batch = 16;
  const Engine e(*f, eo);
  const auto& dg = e.plan().devices[0];
  ASSERT_EQ(dg.kv_window_values * 2, dg.kv_values_per_token) << "one layer of two is local";
  const uint64_t per_position = dg.kv_window_values * 2;  // f16: the values of one position, in bytes
  EXPECT_EQ(parallel::kv_cache_bytes(dg, {512, DType::F16, DType::F16, 1, 16}),
            per_position * 512 + per_position * 2 * (64 + 16));
}

// A slot whose window moved on: continuing from a position it still holds works; below that
// the engine says so, and resumable() gives 0 (start over) instead.
TEST(SlidingWindowCache, RewindingBelowTheWindowStartsOver) {
  tools::GenModelOptions o = model_options({"gemma3", "f32"});
  o.sliding_window = 4;
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "window");
  auto eo = single(DType::F32);
  eo.n_ctx = 128;
  eo.n_batch = 4;  // 16 rows per slot
  Engine e(*f, eo);
  const auto prompt = some_prompt(320, 40);
  const auto full = e.eval_logits(prompt);
  EXPECT_EQ(e.resumable(0, 38), 38);
  EXPECT_EQ(e.resumable(0, 10), 0);
  EXPECT_ERROR(e.truncate(10), "its sliding-window layers no longer hold the keys position 10 needs");
  e.truncate(38);  // then the same last two tokens again: the same logits
  EXPECT_EQ(e.eval_logits(std::vector<Token>(prompt.end() - 2, prompt.end())), full);
  e.truncate(0);
  EXPECT_EQ(e.eval_logits(prompt), full);
}

}  // namespace
}  // namespace weft::runtime
