// The Device conformance suite, parameterised by device kind: what every kind must do, checked
// through the Device interface alone. A new kind adds one INSTANTIATE line at the bottom.
//
// The reference is a one-thread CPU device (itself checked against a double-precision forward and
// the `_ref` kernels in tests/model/reference_forward_test.cpp). The interface runs whole graphs,
// so the ops are checked through whole tiny graphs: every weight type the kind claims, every
// architecture (dense, biases, head norms, tied embeddings, four MoE layouts), and tensor and
// layer splits for the collectives and the residual hand-over; OpsCovered checks that together
// they use every LocalOp.
#include "conformance_run.h"
#include "core/error.h"
#include "device/cpu/cpu_device.h"
#include "support/expect_error.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace weft::device::conformance {
namespace {

class Conformance : public testing::TestWithParam<KindUnderTest> {
 protected:
  // n devices of the kind under test ("cpu:2,cpu:2" for two).
  Devices make(int n = 1) const {
    std::string list = GetParam().spec;
    for (int i = 1; i < n; ++i) list += "," + GetParam().spec;
    return create_devices(parse_devices(list));
  }
  // The scenario on the kind (n devices, split `mode`) against one reference CPU device.
  void expect_matches_reference(const TinyModel& m, const std::string& what,
                                parallel::SplitMode mode = parallel::SplitMode::None, int n = 1) const {
    const auto plan = m.plan(mode, std::vector<double>(n, 1.0));
    Devices reference;
    reference.push_back(std::make_unique<CpuDevice>(CpuDeviceOptions{}));
    const Logits want = run_scenario(reference, m.plan(parallel::SplitMode::None, {1}), m, scenario());
    const Logits got = run_scenario(make(n), plan, m, scenario());
    expect_logits_near(got, want, tolerance(m), what);
  }
  // The kind's tolerance for m: the quantized one where any weight of m is quantized.
  double tolerance(const TinyModel& m) const {
    const auto& ts = m.file->tensors();
    const bool quantized = std::any_of(ts.begin(), ts.end(), [](const gguf::TensorInfo& t) {
      return t.type != DType::F32 && t.type != DType::F16 && t.type != DType::BF16;
    });
    return quantized ? GetParam().quantized_logits_tolerance : GetParam().logits_tolerance;
  }
};

// --- (a) the Device contract ---

// Two sequences from slot 0 (3 tokens) and slot 1 (2 tokens), asking what `first` and `second` say.
Step two_sequences(StepSeq first, StepSeq second) {
  Step step;
  step.tokens = {1, 5, 9, 3, 7};
  first.seq = 0, first.pos0 = 0, first.n_tokens = 3;
  second.seq = 1, second.pos0 = 0, second.n_tokens = 2;
  step.seqs = {std::move(first), std::move(second)};
  return step;
}

TEST_P(Conformance, PollBeforeAnyStepReturnsAtOnce) {
  auto d = make();
  EXPECT_TRUE(d.at(0)->poll(0));
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  d[0]->load(m.plan(parallel::SplitMode::None, {1}).devices[0], *m.file, kLoad);
  EXPECT_TRUE(d[0]->poll(0));
}

TEST_P(Conformance, SubmitPollWaitRunsAStepAndCountsIt) {
  auto d = make();
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  d.at(0)->load(m.plan(parallel::SplitMode::None, {1}).devices[0], *m.file, kLoad);
  d[0]->submit(Step::single({1, 2, 3}, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!d[0]->poll(10)) ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the step never finished";
  const StepResult r = d[0]->wait();
  ASSERT_EQ(r.seqs.size(), 1u);
  EXPECT_FALSE(r.seqs[0].candidates.top.empty());
  EXPECT_EQ(d[0]->stats().steps, 1u);
  EXPECT_TRUE(d[0]->poll(0));  // idle again
}

TEST_P(Conformance, WaitReturnsOneResultPerSequenceWithWhatItAskedFor) {
  auto d = make();
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  d.at(0)->load(m.plan(parallel::SplitMode::None, {1}).devices[0], *m.file, kLoad);
  StepSeq scored;
  scored.want_candidates = false;
  scored.want_logits = true;
  scored.score_next = {4};
  const Step step = two_sequences({}, scored);
  d[0]->submit(step);
  const StepResult r = d[0]->wait();
  ASSERT_EQ(r.seqs.size(), 2u);
  EXPECT_FALSE(r.seqs[0].candidates.top.empty());
  EXPECT_TRUE(r.seqs[0].logits.empty());
  EXPECT_TRUE(r.seqs[0].scores.empty());
  EXPECT_TRUE(r.seqs[1].candidates.top.empty());
  EXPECT_EQ(static_cast<int64_t>(r.seqs[1].logits.size()), m.config.dims.n_vocab);
  ASSERT_EQ(r.seqs[1].scores.size(), 1u);
  EXPECT_FALSE(std::isnan(r.seqs[1].scores[0].target));
  EXPECT_TRUE(r.output.empty());  // not a layer split
  // Candidates come best first.
  const auto& top = r.seqs[0].candidates.top;
  for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].logit, top[i].logit);
}

// A reread (a constrained sequence's whole-vocabulary fallback) samples the logits the last step
// kept, runs no graph, and refuses a slot whose row that step did not keep.
TEST_P(Conformance, ARereadSamplesTheLastStepsKeptLogits) {
  auto d = make();
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  d.at(0)->load(m.plan(parallel::SplitMode::None, {1}).devices[0], *m.file, kLoad);
  StepSeq kept;
  kept.want_logits = true;
  kept.keep_logits = true;
  const Step step = two_sequences(kept, {});
  d[0]->submit(step);
  const StepResult first = d[0]->wait();
  ASSERT_EQ(first.seqs.size(), 2u);
  const std::vector<float>& logits = first.seqs[0].logits;
  ASSERT_EQ(static_cast<int64_t>(logits.size()), m.config.dims.n_vocab);

  Step reread;
  reread.reread = true;
  reread.seqs.resize(1);
  reread.seqs[0].seq = 0;
  reread.seqs[0].sampling.top_k = 0;  // the whole slice
  reread.seqs[0].sampling.temp = 1.f;
  reread.seqs[0].n_logprobs = 2;
  d[0]->submit(reread);
  const StepResult again = d[0]->wait();
  ASSERT_EQ(again.seqs.size(), 1u);
  const auto& top = again.seqs[0].candidates.top;
  ASSERT_EQ(static_cast<int64_t>(top.size()), m.config.dims.n_vocab);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].logit, logits.at(top[i].id)) << "token " << top[i].id;
    if (i > 0) EXPECT_GE(top[i - 1].logit, top[i].logit);
  }
  ASSERT_TRUE(again.seqs[0].logprobs.has_value());
  EXPECT_EQ(again.seqs[0].logprobs->top.size(), 2u);
  reread.seqs[0].candidate_ids = {7, 2, static_cast<Token>(m.config.dims.n_vocab) + 5, 40};  // one past the slice
  d[0]->submit(reread);
  const StepResult listed = d[0]->wait();
  ASSERT_EQ(listed.seqs.size(), 1u);
  ASSERT_EQ(listed.seqs[0].candidates.top.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const model::Candidate& c = listed.seqs[0].candidates.top[i];
    EXPECT_EQ(c.id, std::vector<Token>({7, 2, 40})[i]);
    EXPECT_EQ(c.logit, logits.at(c.id));
  }
  reread.seqs[0].candidate_ids.clear();
  EXPECT_EQ(d[0]->stats().steps, 1u);  // no forward pass

  reread.seqs[0].seq = 1;  // its row was not kept
  d[0]->submit(reread);
  EXPECT_ERROR(d[0]->wait(), "did not keep");
  d[0]->submit(Step::single({4}, 3));  // slot 0 again, without keep_logits: nothing is kept now
  d[0]->wait();
  reread.seqs[0].seq = 0;
  d[0]->submit(reread);
  EXPECT_ERROR(d[0]->wait(), "did not keep");
}

TEST_P(Conformance, AFailedStepNamesItsDevice) {
  auto d = make();
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  d.at(0)->load(m.plan(parallel::SplitMode::None, {1}).devices[0], *m.file, kLoad);
  d[0]->submit(Step::single({1, static_cast<Token>(m.config.dims.n_vocab)}, 0));
  try {
    d[0]->wait();
    ADD_FAILURE() << "a token outside the vocabulary ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.device(), d[0]->name()) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
}

TEST_P(Conformance, AbortEndsAStepWaitingForItsPeer) {
  auto d = make(2);
  const auto& m = tiny_model("tiny", "q8_0", "llama");
  connect_group(d, parallel::WireType::F32);
  load_devices(d, m.plan(parallel::SplitMode::Tensor, {1, 1}).devices, *m.file, kLoad);
  d[0]->submit(Step::single({1, 2, 3}, 0));  // its peer never joins the step's first all-reduce
  EXPECT_FALSE(d[0]->poll(50));
  d[0]->abort();
  EXPECT_TRUE(d[0]->poll(10000)) << "abort did not end the step";
  try {
    d[0]->wait();
    ADD_FAILURE() << "an aborted step returned a result";
  } catch (const Error& e) {
    EXPECT_EQ(e.device(), d[0]->name()) << e.what();
  }
}

// --- (b) every weight type the kind claims ---

TEST_P(Conformance, EveryClaimedWeightTypeLoadsAndMatchesTheReference) {
  const auto probe = make();
  int claimed = 0;
  for (const std::string type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k",
                                 "q4_k", "q5_k", "q6_k", "iq4_xs", "q4_k_m", "q5_k_m"}) {
    // The 256-value types in rows they fill (q4_k_m / q5_k_m: q4_k / q5_k, q6_k in output and some layers).
    const bool super_blocks = type.find("_k") != std::string::npos || type == "iq4_xs";
    const auto& m = tiny_model(super_blocks ? "tiny-k" : "tiny", type, "llama");
    const DType t = m.file->tensor("blk.0.ffn_up.weight").type;
    // The model holds the type this case names, not a fallback that would leave it unchecked.
    EXPECT_EQ(dtype_name(t), type.ends_with("_m") ? type.substr(0, type.size() - 2) : type);
    if (!probe[0]->supports(parallel::LocalOp::MatMul, t)) continue;
    ++claimed;
    expect_matches_reference(m, type);
  }
  // mxfp4 (llama-quantize's MXFP4_MOE) is a mixture's experts only: gpt-oss's, as in its files.
  const auto& mx = tiny_model("tiny-moe", "mxfp4", "gpt-oss");
  EXPECT_EQ(mx.file->tensor("blk.0.ffn_up_exps.weight").type, DType::MXFP4);
  if (probe[0]->supports(parallel::LocalOp::ExpertMatMul, DType::MXFP4)) {
    ++claimed;
    expect_matches_reference(mx, "mxfp4");
  }
  EXPECT_GT(claimed, 0) << "the kind claims no weight type";
}

// --- (c) the ops, through whole graphs ---

TEST_P(Conformance, EveryArchitectureMatchesTheReference) {
  expect_matches_reference(tiny_model("tiny", "q8_0", "qwen2"), "qwen2 (q/k/v biases)");
  expect_matches_reference(tiny_model("tiny", "q8_0", "qwen3"), "qwen3 (head norms)");
  expect_matches_reference(tiny_model("tiny", "q8_0", "llama", /*tied=*/true), "tied embeddings");
  expect_matches_reference(tiny_model("tiny", "q8_0", "gemma3"), "gemma3 (GELU gate, post-norms, sliding window)");
  expect_matches_reference(tiny_model("tiny", "q8_0", "phi3"), "phi3 (fused q/k/v and gate/up, LongRoPE)");
  expect_matches_reference(tiny_model("tiny", "q8_0", "gemma4"), "gemma4 (K as V, V norm, proportional RoPE)");
  expect_matches_reference(tiny_model("tiny-heads", "q8_0", "gemma4"), "gemma4 (heads per layer)");
  expect_matches_reference(tiny_model("tiny-e2b", "q8_0", "gemma4"), "gemma4 E2B (per-layer inputs, shared KV)");
  for (const std::string arch : {"llama", "qwen2moe", "qwen3moe", "gpt-oss", "gemma4"})
    expect_matches_reference(tiny_model("tiny-moe", "q8_0", arch), "MoE " + arch);
  // DeepSeek's latent attention and grouped sigmoid routing, where the kind has their ops (the
  // Vulkan kind has no shaders for them yet: the engine refuses it by op, runtime tests check).
  if (make()[0]->supports(parallel::LocalOp::LatentAttention, DType::F32)) {
    expect_matches_reference(tiny_model("tiny-moe", "q8_0", "deepseek2"), "deepseek2 (MLA, grouped routing)");
    expect_matches_reference(tiny_model("tiny-moe", "q8_0", "deepseek2"), "deepseek2 tensor split",
                             parallel::SplitMode::Tensor, 3);
  }
  // Qwen 3.5's Gated DeltaNet (its conv and recurrence carry state from step to step) and gated
  // full attention, likewise where the kind has their ops.
  if (make()[0]->supports(parallel::LocalOp::DeltaNet, DType::F32)) {
    expect_matches_reference(tiny_model("tiny", "q8_0", "qwen35"), "qwen35 (Gated DeltaNet, gated attention)");
    expect_matches_reference(tiny_model("tiny-moe", "q8_0", "qwen35moe"), "qwen35moe tensor split",
                             parallel::SplitMode::Tensor, 2);
    expect_matches_reference(tiny_model("tiny-moe", "q8_0", "qwen3next"), "qwen3next tensor split (grouped heads)",
                             parallel::SplitMode::Tensor, 2);
  }
}

TEST_P(Conformance, SplitsMatchTheReference) {
  using parallel::SplitMode;
  expect_matches_reference(tiny_model("tiny", "q8_0", "llama"), "tensor split", SplitMode::Tensor, 2);
  expect_matches_reference(tiny_model("tiny", "q8_0", "llama"), "layer split", SplitMode::Layer, 2);
  expect_matches_reference(tiny_model("tiny-moe", "q8_0", "qwen2moe"), "MoE tensor split", SplitMode::Tensor, 2);
  expect_matches_reference(tiny_model("tiny", "q8_0", "gemma4"), "gemma4 tensor split", SplitMode::Tensor, 2);
  expect_matches_reference(tiny_model("tiny-heads", "q8_0", "gemma4"), "gemma4 heads per layer, tensor split",
                           SplitMode::Tensor, 2);
  expect_matches_reference(tiny_model("tiny-e2b", "q8_0", "gemma4"), "gemma4 E2B tensor split", SplitMode::Tensor, 2);
  // gpt-oss: the biases added once to the partial sums of attn_output and of the experts' down
  expect_matches_reference(tiny_model("tiny-moe", "q8_0", "gpt-oss"), "gpt-oss tensor split", SplitMode::Tensor, 2);
  // Gemma 4: halves of fused expert stacks, per-expert scales, the router's constant scale
  expect_matches_reference(tiny_model("tiny-moe", "q8_0", "gemma4"), "gemma4 MoE tensor split", SplitMode::Tensor, 2);
}

// The graphs of the tests above, between them, use every LocalOp.
TEST_P(Conformance, OpsCovered) {
  using parallel::SplitMode;
  std::set<parallel::LocalOp> used;
  auto add = [&](const parallel::Plan& p) {
    for (const auto& g : p.devices)
      for (const auto& n : g.nodes) used.insert(n.op);
  };
  for (const std::string arch : {"llama", "qwen2", "qwen3", "gemma3", "gemma4", "phi3"})
    add(tiny_model("tiny", "q8_0", arch).plan(SplitMode::None, {1}));
  for (const std::string arch : {"llama", "qwen2moe", "qwen3moe", "gpt-oss", "deepseek2"})
    add(tiny_model("tiny-moe", "q8_0", arch).plan(SplitMode::None, {1}));
  add(tiny_model("tiny", "q8_0", "qwen35").plan(SplitMode::None, {1}));
  add(tiny_model("tiny", "q8_0", "llama").plan(SplitMode::Tensor, {1, 1}));
  add(tiny_model("tiny", "q8_0", "llama").plan(SplitMode::Layer, {1, 1}));
  add(tiny_model("tiny-moe", "q8_0", "qwen2moe").plan(SplitMode::Tensor, {1, 1}));
  add(tiny_model("tiny-e2b", "q8_0", "gemma4").plan(SplitMode::None, {1}));  // Slice
  // AllGather: the planner emits it only for an op without a split rule (a fallback, which `weft
  // plan` lists); no graph weft builds has one now. tests/parallel checks the collective itself.
  used.insert(parallel::LocalOp::AllGather);
  for (int op = 0; op < static_cast<int>(parallel::LocalOp::Count); ++op)
    EXPECT_TRUE(used.count(static_cast<parallel::LocalOp>(op)))
        << parallel::local_op_name(static_cast<parallel::LocalOp>(op)) << " is in no graph of the suite";
}

// Each kind's devices: the spec that makes one, and its tolerance against the reference. CPU
// devices run the reference's arithmetic (measured: identical logits, splits included); 1e-5
// leaves room for a summation order. Vk: only in a build with Vulkan (tests/CMakeLists.txt defines
// WEFT_TEST_VULKAN there), under the validation layer (tests/support/vk_validation.h, which this
// binary's vulkan/ tests register).
#ifndef WEFT_TEST_VULKAN
#define WEFT_TEST_VULKAN 0
#endif
std::vector<KindUnderTest> kinds() {
  std::vector<KindUnderTest> k = {{"Cpu", "cpu:2", 1e-5, 1e-5}};
  if (WEFT_TEST_VULKAN) k.push_back({"Vk", "vk:0", 1e-3, 1e-2});
  return k;
}

INSTANTIATE_TEST_SUITE_P(Kinds, Conformance, testing::ValuesIn(kinds()),
                         [](const testing::TestParamInfo<KindUnderTest>& p) { return p.param.name; });

}  // namespace
}  // namespace weft::device::conformance
