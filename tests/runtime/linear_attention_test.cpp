// Qwen 3.5's and Qwen3-Next's Gated DeltaNet in the engine: what the plan holds on each device (key
// heads split with their value heads, a run of them in each block of key heads, or one run in
// Qwen3-Next's grouped order; one all-reduce after ssm_out; the
// recurrent state per slot), every split and worker processes giving one device's tokens and
// logits, sequences decoded together giving what each gives alone, and a conversation rewound
// below its state starting over to the tokens of a fresh run. The double-precision forward is in
// reference_forward_test, llama.cpp's tokens in llama_cpp_greedy_test.
#include "device/worker_process.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/parallel_equality.h"
#include "runtime/scheduler.h"

#include "support/expect_error.h"
#include "support/generated_model.h"
#include "support/job_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace weft::runtime {
namespace {

using equality::configs;
using equality::expect_logits_match;
using equality::options;
using equality::single;
using equality::some_prompt;
using parallel::LocalOp;
using parallel::SplitMode;
using test_support::cpu_engine_options;
using test_support::GeneratedModel;
using test_support::qwen35;
using test_support::text_of;

const parallel::LocalNode* find(const parallel::DeviceGraph& dg, int layer, const std::string& label) {
  for (const auto& ln : dg.nodes)
    if (ln.layer == layer && ln.label == label) return &ln;
  return nullptr;
}

TEST(LinearAttention, PlanSplitsKeyHeadsWithTheirValueHeads) {
  const GeneratedModel m(qwen35());
  const Engine e(*m.file, cpu_engine_options(2, 1, 64));
  const auto& plan = e.plan();
  const auto& d = plan.devices[0].dims;
  ASSERT_TRUE(d.recurrent() && d.linear_attention(0) && !d.linear_attention(3));
  ASSERT_EQ(d.linear_k_heads, 2);
  ASSERT_EQ(d.linear_v_heads, 4);
  EXPECT_TRUE(plan.fallbacks.empty());
  for (int l = 0; l < d.n_layer; ++l) EXPECT_EQ(plan.collectives_in_layer(l), 2) << "layer " << l;
  const int64_t hd = d.linear_head_dim, kw = d.linear_k_heads * hd, vw = d.linear_v_heads * hd;
  uint64_t state = 0;
  for (int dev = 0; dev < 2; ++dev) {
    const auto& dg = plan.devices[dev];
    // Key head `dev` and value heads dev and dev + 2 (tiled): rows of v's segment of attn_qkv,
    // columns of ssm_out, elements of ssm_a, in two runs a block of key heads apart.
    const auto* v = find(dg, 0, "linear_v");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->weight.range.begin, 2 * kw + dev * hd);
    EXPECT_EQ(v->weight.range.size(), hd);
    EXPECT_EQ(v->weight.stride, kw);
    EXPECT_EQ(v->weight.repeats, 2);
    EXPECT_EQ(v->width, 2 * hd);
    const auto* out = find(dg, 0, "ssm_out");
    ASSERT_TRUE(out);
    EXPECT_EQ(out->weight.kind, parallel::WeightSlice::Kind::Cols);
    EXPECT_EQ(out->weight.range.begin, dev * hd);
    EXPECT_EQ(out->weight.stride, kw);
    EXPECT_EQ(out->weight.repeats, 2);
    const auto* delta = find(dg, 0, "delta_net");
    ASSERT_TRUE(delta);
    EXPECT_EQ(delta->weight.range.begin, dev);
    EXPECT_EQ(delta->weight.stride, d.linear_k_heads);
    EXPECT_EQ(delta->width, 2 * hd);
    state += dg.state_values_per_slot;
  }
  // The state, split without overlap: each channel's last kernel - 1 inputs, a matrix per value head.
  const uint64_t per_layer = (d.linear_conv_kernel - 1) * (2 * kw + vw) + d.linear_v_heads * hd * hd;
  EXPECT_EQ(state, 3 * per_layer);
}

// Qwen3-Next's grouped order: key head `dev` with value heads 2 dev and 2 dev + 1, one run of
// rows, columns and elements everywhere; its fused projections (ssm_ba; the older ssm_in) cut by
// key heads and sliced per key head on the device, with no collective of their own.
TEST(LinearAttention, Qwen3NextPlanSplitsKeyHeadsWithTheirGroupedValueHeads) {
  for (const bool fused_qkvz : {false, true}) {
    auto o = qwen35("q8_0", "qwen3next");
    o.fused_qkvz = fused_qkvz;
    const GeneratedModel m(o);
    const Engine e(*m.file, cpu_engine_options(2, 1, 64));
    const auto& plan = e.plan();
    const auto& d = plan.devices[0].dims;
    ASSERT_TRUE(d.linear_v_grouped);
    EXPECT_TRUE(plan.fallbacks.empty()) << fmt::format("{}", fmt::join(plan.fallbacks, "; "));
    for (int l = 0; l < d.n_layer; ++l) EXPECT_EQ(plan.collectives_in_layer(l), 2) << "layer " << l;
    const int64_t hd = d.linear_head_dim, kw = d.linear_k_heads * hd, r = d.linear_v_heads / d.linear_k_heads;
    for (int dev = 0; dev < 2; ++dev) {
      SCOPED_TRACE(fmt::format("device {}, ssm_in {}", dev, fused_qkvz));
      const auto& dg = plan.devices[dev];
      if (fused_qkvz) {  // rows of its key head's [q; k; v; z], then slices of each
        const auto* qkvz = find(dg, 0, "linear_qkvz");
        ASSERT_TRUE(qkvz);
        EXPECT_EQ(qkvz->weight.range.begin, dev * (2 + 2 * r) * hd);
        EXPECT_EQ(qkvz->weight.taken(), (2 + 2 * r) * hd);
        const auto* z = find(dg, 0, "linear_z");
        ASSERT_TRUE(z);
        EXPECT_EQ(z->op, LocalOp::Slice);
        EXPECT_EQ(z->offset, 2 * hd + r * hd);
        EXPECT_EQ(z->width, r * hd);
      } else {
        const auto* v = find(dg, 0, "linear_v");
        ASSERT_TRUE(v);
        EXPECT_EQ(v->weight.range.begin, 2 * kw + dev * r * hd);
        EXPECT_EQ(v->weight.range.size(), r * hd);
        EXPECT_EQ(v->weight.repeats, 1);
      }
      const auto* ba = find(dg, 0, "ssm_ba");
      ASSERT_TRUE(ba);
      EXPECT_EQ(ba->weight.range.begin, dev * 2 * r);
      EXPECT_EQ(ba->weight.taken(), 2 * r);
      const auto* out = find(dg, 0, "ssm_out");
      ASSERT_TRUE(out);
      EXPECT_EQ(out->weight.kind, parallel::WeightSlice::Kind::Cols);
      EXPECT_EQ(out->weight.range.begin, dev * r * hd);
      EXPECT_EQ(out->weight.taken(), r * hd);
      const auto* delta = find(dg, 0, "delta_net");
      ASSERT_TRUE(delta);
      EXPECT_EQ(delta->weight.range.begin, dev * r);
      EXPECT_EQ(delta->weight.taken(), r);
    }
  }
}

// Every split, in-process devices: the greedy tokens of one device, logits within kLogitRelTol.
void expect_every_split_matches(tools::GenModelOptions o) {
  o.seed = 3;
  const GeneratedModel m(o);
  const auto prompt = some_prompt(320, 21);
  const auto ref = equality::greedy(*m.file, single(), prompt, 40);
  ASSERT_EQ(ref.size(), 40u);
  for (const auto& c : configs()) {
    EXPECT_EQ(equality::greedy(*m.file, options(c), prompt, 40), ref) << c.name;
    expect_logits_match(*m.file, c, prompt);
  }
}

class LinearAttentionSplits : public ::testing::TestWithParam<std::string> {};

// (Seed 7's q4_k_m file has a near-tie at its fourth step that any split's last-bit sums tip, by
// 0.9%; --exact gives one device's bits there too: ExactInference.Qwen35EveryConfigBitForBit.)
TEST_P(LinearAttentionSplits, GreedyTokensAndLogitsMatchEveryConfig) { expect_every_split_matches(qwen35(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Types, LinearAttentionSplits, ::testing::Values("f32", "f16", "q8_0", "q4_k_m"),
                         [](const auto& p) { return p.param; });

// Qwen3-Next, both of its layouts (ssm_in: the older files'), every split.
class Qwen3NextSplits : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(Qwen3NextSplits, GreedyTokensAndLogitsMatchEveryConfig) {
  auto o = qwen35(std::get<0>(GetParam()), "qwen3next");
  o.fused_qkvz = std::get<1>(GetParam());
  expect_every_split_matches(o);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Qwen3NextSplits,
                         ::testing::Values(std::tuple{"f32", false}, std::tuple{"q8_0", true},
                                           std::tuple{"q4_k_m", false}, std::tuple{"bf16", true}),
                         [](const auto& p) { return std::get<0>(p.param) + (std::get<1>(p.param) ? "_ssm_in" : ""); });

// A worker streamed its slices (value heads in runs among them) and one reading its own copy,
// beside a local device; and a layer split with a worker holding the last layers' states.
TEST(LinearAttention, WorkerProcessesMatchOneDevice) {
  const std::string dir = ::testing::TempDir() + "/weft_linear_remote";
  std::filesystem::create_directories(dir);
  for (const std::string arch : {"qwen35", "qwen35moe", "qwen3next"}) {
    tools::GenModelOptions o = qwen35("q8_0", arch);
    o.fused_qkvz = arch == "qwen3next";  // the per-key-head slices on a worker
    o.path = dir + "/" + arch + ".gguf";
    tools::generate_model(o);
    auto f = gguf::File::open(o.path);
    const auto prompt = some_prompt(320, 15);
    const auto ref = equality::greedy(*f, single(), prompt, 24);
    using device::remote::testing_support::Worker;
    Worker streamed, own_copy({"--model-dir", dir});
    EngineOptions mix = options({"remote", SplitMode::Tensor, {1, 1, 1}});
    mix.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, streamed.address()};
    mix.devices[2] = {device::DeviceSpec::Kind::Remote, 1, -1, own_copy.address()};
    EXPECT_EQ(equality::greedy(*f, mix, prompt, 24), ref) << arch;
    EngineOptions layers = options({"remote layers", SplitMode::Layer, {1, 1}});
    layers.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, streamed.address()};
    expect_logits_match(*f, layers, arch + " layer split with a worker", prompt);
  }
}

// Continuous batching: each slot keeps its own state; sequences decoded together, on one device
// and on a split, give the greedy text each gives alone.
TEST(LinearAttention, SequencesTogetherGiveWhatEachGivesAlone) {
  const GeneratedModel m(qwen35("q8_0"));
  auto request = [](int i) { return test_support::greedy_request(some_prompt(300, 5 + 3 * i), 10); };
  for (int n_dev : {1, 2}) {
    std::vector<std::string> alone;
    {
      Engine engine(*m.file, cpu_engine_options(n_dev, 1, 64, 8));
      Scheduler s(engine, *m.tok);
      for (int i = 0; i < 3; ++i) alone.push_back(text_of(*s.submit(request(i))));
    }
    Engine engine(*m.file, cpu_engine_options(n_dev, 3, 64, 8));
    Scheduler s(engine, *m.tok);
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 3; ++i) jobs.push_back(s.submit(request(i)));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(text_of(*jobs[i]), alone[i]) << n_dev << " devices, request " << i;
    EXPECT_NE(alone[0], alone[1]);
  }
}

// The state holds the slot's last position only: continuing there works, a rewind below it is
// refused (resumable() says start over), and starting over gives a fresh engine's logits.
TEST(LinearAttention, RewindingBelowTheStateStartsOver) {
  const GeneratedModel m(qwen35());
  for (int n_dev : {1, 3}) {
    Engine e(*m.file, cpu_engine_options(n_dev, 1, 64, 8));
    const auto prompt = some_prompt(300, 20), more = some_prompt(300, 6);
    const auto first = e.eval_logits(prompt);
    EXPECT_EQ(e.resumable(0, 20), 20);
    EXPECT_EQ(e.resumable(0, 12), 0);
    EXPECT_ERROR(e.truncate(12), "its recurrent state is at position 20, not 12");
    e.truncate(20);  // a no-op: the state is there
    const auto next = e.eval_logits(more);
    e.truncate(0);
    EXPECT_EQ(e.eval_logits(prompt), first) << n_dev << " devices";
    Engine fresh(*m.file, cpu_engine_options(n_dev, 1, 64, 8));
    std::vector<Token> both = prompt;
    both.insert(both.end(), more.begin(), more.end());
    EXPECT_EQ(fresh.eval_logits(both), next) << n_dev << " devices";
  }
}

// A re-plan (--rebalance, forced every 4 steps) reloads the devices and replays each slot from
// position 0, as a device loss does: the states are rebuilt, and the tokens are those of a run
// without re-plans.
TEST(LinearAttention, ReplansRebuildTheStateToTheSameTokens) {
  auto o = qwen35("f32");
  o.seed = 3;
  const GeneratedModel m(o);
  const auto prompt = some_prompt(300, 21);
  model::SamplingParams greedy_p;
  greedy_p.temp = 0;
  EngineOptions eo = options({"tp2", SplitMode::Tensor, {1, 1}});
  const auto want = equality::greedy(*m.file, eo, prompt, 32);
  eo.rebalance = {true, 4, 0.0, 0.0};
  Engine e(*m.file, eo);
  EXPECT_EQ(generate(e, nullptr, prompt, 32, greedy_p).generated, want);
  EXPECT_GE(e.rebalances(), 2);
}

// A chat's second turn through the scheduler: a prompt extending what the slot holds continues
// from its state, one that departs from it starts over; each gives a fresh engine's text.
TEST(LinearAttention, SecondTurnsContinueOrStartOverAsAFreshRun) {
  const GeneratedModel m(qwen35("q8_0"));
  const auto turn1 = some_prompt(300, 14);
  std::vector<Token> extend = turn1, depart = turn1;
  for (Token t : some_prompt(300, 5)) extend.push_back(t);
  depart.resize(9);
  for (Token t : some_prompt(300, 8)) depart.push_back(t);
  for (const auto& turn2 : {extend, depart}) {
    std::string fresh;
    {
      Engine engine(*m.file, cpu_engine_options(2, 1, 64, 8));
      Scheduler s(engine, *m.tok);
      fresh = text_of(*s.submit(test_support::greedy_request(turn2, 8)));
    }
    Engine engine(*m.file, cpu_engine_options(2, 1, 64, 8));
    Scheduler s(engine, *m.tok);
    text_of(*s.submit(test_support::greedy_request(turn1, 8)));
    EXPECT_EQ(text_of(*s.submit(test_support::greedy_request(turn2, 8))), fresh);
  }
}

}  // namespace
}  // namespace weft::runtime
