// --exact: every split configuration gives the logits of one device bit for bit (memcmp, no
// tolerance), so greedy tokens agree however long the text. The random-weight models here include
// the seeds whose splits part from one device without --exact (see tensor_parallel_test.cpp), and a
// control shows such a split does differ without it: the comparison can fail.
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tools/gen_model.h"

#include "runtime/parallel_equality.h"
#include "support/expect_error.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace weft::runtime {
namespace {

using equality::Config;
using equality::configs;
using equality::some_prompt;

EngineOptions exact(EngineOptions o, bool on = true) {
  o.exact = on;
  o.k_type = o.v_type = DType::F32;
  return o;
}

// The prompt in steps of n_batch 16, then single-token steps fed the first engine's greedy token.
// Returns the first step whose logits differ (-1: none).
int first_difference(const gguf::File& f, EngineOptions a, EngineOptions b, const std::vector<Token>& prompt,
                     int steps) {
  Engine ea(f, std::move(a)), eb(f, std::move(b));
  std::vector<Token> feed = prompt;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> la = ea.eval_logits(feed), lb = eb.eval_logits(feed);
    if (la.size() != lb.size() || std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) != 0) return step;
    feed = {static_cast<Token>(std::max_element(la.begin(), la.end()) - la.begin())};
  }
  return -1;
}

void expect_every_config_exact(const gguf::File& f, const std::vector<Token>& prompt, int steps) {
  for (const Config& c : configs())
    EXPECT_EQ(first_difference(f, exact(equality::single()), exact(equality::options(c)), prompt, steps), -1) << c.name;
}

std::unique_ptr<gguf::File> generated(const std::string& type, uint64_t seed, std::vector<uint8_t>& bytes, bool wide) {
  tools::GenModelOptions o;
  o.preset = "tiny";
  o.type = type;
  o.seed = seed;
  if (wide) o.overrides = {.n_embd = 512, .n_layer = 2, .n_ff = 1024, .n_head = 8, .n_head_kv = 4, .n_vocab = 320};
  bytes = tools::generate_model_bytes(o);
  return gguf::File::parse(bytes.data(), bytes.size(), type);
}

TEST(ExactInference, Stories260kEveryConfigBitForBit) {
  const std::string path = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";
  WEFT_NEED_SHARED_FILE(path);
  auto f = gguf::File::open(path);
  expect_every_config_exact(*f, some_prompt(f->tensor("token_embd.weight").shape[1], 37), 24);
}

class ExactTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactTypes, EveryConfigBitForBit) {
  std::vector<uint8_t> bytes;
  auto f = generated(GetParam(), 42, bytes, /*wide=*/false);
  expect_every_config_exact(*f, some_prompt(f->tensor("token_embd.weight").shape[1], 21), 16);
}

INSTANTIATE_TEST_SUITE_P(Types, ExactTypes,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m",
                                           "iq4_nl"));

// K-quant blocks of 256 in rows of 512 and 1024: heads and the FFN cut on super-blocks.
class ExactKQuants : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactKQuants, EveryConfigBitForBit) {
  std::vector<uint8_t> bytes;
  auto f = generated(GetParam(), 42, bytes, /*wide=*/true);
  expect_every_config_exact(*f, some_prompt(320, 19), 16);
}

INSTANTIATE_TEST_SUITE_P(Types, ExactKQuants, ::testing::Values("q4_k_m", "q3_k", "q2_k", "iq4_xs", "q6_k", "q5_k"));

// Gemma 4's heads per layer (global 32 wide over 1 KV head, the others 16 over 2): more devices
// than the global layers' KV head cut single query heads, so a sliding-window layer's cut falls
// on 16 features, inside a granule of the global layers' heads; each layer has its own.
TEST(ExactInference, Gemma4HeadsPerLayerEveryConfigBitForBit) {
  for (const char* type : {"f32", "q8_0"}) {
    tools::GenModelOptions o;
    o.arch = "gemma4";
    o.type = type;
    o.seed = 7;
    o.sliding_window = 6;
    o.overrides.head_dim = 32;
    o.overrides.head_dim_swa = 16;
    o.overrides.n_head_kv = 1;
    o.overrides.n_head_kv_swa = 2;
    const auto bytes = tools::generate_model_bytes(o);
    auto f = gguf::File::parse(bytes.data(), bytes.size(), type);
    SCOPED_TRACE(type);
    expect_every_config_exact(*f, some_prompt(320, 21), 16);
  }
}

// Mixtures of experts, cut by experts (--moe-split expert) and by each expert's width (tensor):
// the experts' weighted sum in fixed point, per slot and granule. Llama's (Mixtral) and Qwen3's
// layouts, gpt-oss's (expert biases, added by one device), Gemma 4's (a dense FFN beside the
// experts, three all-reduces a layer; its seed 3 has the near-tie a split tipped without --exact)
// and Qwen2-MoE's (a shared expert whose gate scales its sum, added to the experts' in integers);
// DeepSeek's (latent attention: each head's up-projections and attention whole on one device, its
// output's sum cut on heads of v_head_dim; an ungated shared expert).
void expect_moe_exact(const gguf::File& f) {
  {  // the fixed-point sums are the float ones, within rounding
    Engine floats(f, exact(equality::single(), false)), fixed(f, exact(equality::single()));
    const auto prompt = some_prompt(320, 19);
    const auto a = floats.eval_logits(prompt), b = fixed.eval_logits(prompt);
    ASSERT_EQ(a.size(), b.size());
    const double scale = std::max(equality::max_abs(a), 1e-6);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4 * scale) << "logit " << i;
  }
  for (parallel::MoeSplit m : {parallel::MoeSplit::Tensor, parallel::MoeSplit::Expert})
    for (Config c : configs()) {
      c.moe = m;
      EXPECT_EQ(first_difference(f, exact(equality::single()), exact(equality::options(c)), some_prompt(320, 19), 16),
                -1)
          << c.name << " " << parallel::moe_split_name(m);
    }
}

class ExactMoe : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactMoe, EveryConfigBothSplitsBitForBit) {
  for (const char* type : {"f32", "q8_0"}) {
    tools::GenModelOptions o;
    o.preset = "tiny-moe";
    o.arch = GetParam();
    o.type = type;
    o.seed = 3;
    o.sliding_window = 6;
    const auto bytes = tools::generate_model_bytes(o);
    auto f = gguf::File::parse(bytes.data(), bytes.size(), type);
    SCOPED_TRACE(type);
    expect_moe_exact(*f);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ExactMoe,
                         ::testing::Values("qwen3moe", "llama", "gpt-oss", "gemma4", "qwen2moe", "deepseek2",
                                           "qwen35moe", "qwen3next"),
                         [](const auto& p) { return p.param == "gpt-oss" ? std::string("gpt_oss") : p.param; });

// Qwen 3.5's Gated DeltaNet: each value head's recurrence whole on one device, ssm_out's sum cut
// on its key heads' runs of value heads; the attention output's gate per head.
TEST(ExactInference, Qwen35EveryConfigBitForBit) {
  for (const char* type : {"f32", "q8_0", "q4_k_m"}) {
    tools::GenModelOptions o;
    o.arch = "qwen35";
    o.type = type;
    o.seed = 7;                     // q4_k_m: a near-tie that splits tip without --exact (linear_attention_test)
    o.overrides.lin_head_dim = 32;  // q8_0's key heads cut one by one
    const auto bytes = tools::generate_model_bytes(o);
    auto f = gguf::File::parse(bytes.data(), bytes.size(), type);
    SCOPED_TRACE(type);
    expect_every_config_exact(*f, some_prompt(320, 19), 16);
  }
}

// Experts two K blocks wide: the tensor split cuts each on a super-block.
TEST(ExactInference, KQuantExpertsBothSplitsBitForBit) {
  tools::GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = "qwen3moe";
  o.type = "q4_k_m";
  o.overrides = {.n_embd = 256, .n_head = 4, .n_head_kv = 2, .n_expert = 4, .n_ff_exp = 512};
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "kquant-moe");
  expect_moe_exact(*f);
}

// Two worker processes and a local device, both splits: the workers' fixed-point expert sums travel
// as integers and give one device's logits.
TEST(ExactInference, MoeWorkerProcessesBitForBit) {
  const std::string dir = ::testing::TempDir() + "/weft_exact_moe_remote";
  std::filesystem::create_directories(dir);
  tools::GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = "gpt-oss";
  o.type = "q8_0";
  o.sliding_window = 6;
  o.path = dir + "/tiny-moe.gguf";
  tools::generate_model(o);
  auto f = gguf::File::open(o.path);
  using device::remote::testing_support::Worker;
  for (parallel::MoeSplit m : {parallel::MoeSplit::Tensor, parallel::MoeSplit::Expert}) {
    Worker w1, w2;
    EngineOptions mix = exact(equality::options({"remote", parallel::SplitMode::Tensor, {1, 2, 1}, m}));
    mix.devices[0] = {device::DeviceSpec::Kind::Remote, 1, -1, w1.address()};
    mix.devices[2] = {device::DeviceSpec::Kind::Remote, 1, -1, w2.address()};
    EXPECT_EQ(first_difference(*f, exact(equality::single()), mix, some_prompt(320, 19), 16), -1)
        << parallel::moe_split_name(m);
  }
}

// The control: q2_k with seed 42 parts from one device within four steps without --exact.
TEST(ExactInference, WithoutItASplitDiffers) {
  std::vector<uint8_t> bytes;
  auto f = generated("q2_k", 42, bytes, /*wide=*/true);
  const Config tp2{"tp2", parallel::SplitMode::Tensor, {1, 1}};
  EXPECT_NE(first_difference(*f, exact(equality::single(), false), exact(equality::options(tp2), false),
                             some_prompt(320, 19), 16),
            -1);
}

// --mmap: one device reading its weights from the mapping gives a split's bits (what the kernels
// repack is copied into panels under --exact, as a split's column slices always are).
TEST(ExactInference, MappedWeightsEveryConfigBitForBit) {
  for (const char* type : {"q8_0", "q4_k_m"}) {
    std::vector<uint8_t> bytes;
    auto f = generated(type, 42, bytes, /*wide=*/std::string(type) == "q4_k_m");
    EngineOptions mapped = exact(equality::single());
    mapped.map_weights = true;
    for (const Config& c : configs()) {
      EngineOptions split = exact(equality::options(c));
      split.map_weights = c.name.find("uneven") != std::string::npos;  // mapped splits too
      EXPECT_EQ(first_difference(*f, mapped, split, some_prompt(320, 19), 16), -1) << type << " " << c.name;
    }
  }
}

// Llama 3 8B's layer widths (4096 wide, 32 heads of 128 over 8 KV heads, an FFN of 14336), one
// layer and a small vocabulary: the granules and cuts of a real size.
TEST(ExactInference, EightBLayerShapesBitForBit) {
  tools::GenModelOptions o;
  o.preset = "8b-shape";
  o.type = "q4_0";
  o.seed = 42;
  o.overrides = {.n_layer = 1, .n_vocab = 512};
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "8b layer");
  using parallel::SplitMode;
  for (const Config& c : {Config{"tp2", SplitMode::Tensor, {1, 1}}, Config{"tp3_uneven", SplitMode::Tensor, {1, 2, 3}},
                          Config{"tp8", SplitMode::Tensor, {1, 1, 1, 1, 1, 1, 1, 1}}})
    EXPECT_EQ(first_difference(*f, exact(equality::single()), exact(equality::options(c)), some_prompt(512, 9), 4), -1)
        << c.name;
}

// -ts auto: the ratios the calibration measured (and the re-plan to them) keep one device's bits.
TEST(ExactInference, MeasuredRatiosBitForBit) {
  std::vector<uint8_t> bytes;
  auto f = generated("q4_0", 42, bytes, /*wide=*/true);
  EngineOptions measured = exact(equality::options({"tp3", parallel::SplitMode::Tensor, {1, 1, 1}}));
  measured.auto_ratios = true;
  measured.rebalance.min_change = 0;  // re-plan to whatever it measured
  EXPECT_EQ(first_difference(*f, exact(equality::single()), measured, some_prompt(320, 19), 16), -1);
}

TEST(ExactInference, RefusedWhereItCannotHold) {
  std::vector<uint8_t> bytes;
  auto f = generated("q4_0", 42, bytes, /*wide=*/false);
  EngineOptions o = exact(equality::options({"tp2", parallel::SplitMode::Tensor, {1, 1}}));
  o.wire = parallel::WireType::BF16;
  EXPECT_ERROR(Engine(*f, o), "--exact moves fixed-point sums, not --wire bf16");
}

}  // namespace
}  // namespace weft::runtime
