// The engine plans within the devices' memory: a worker that says it holds little (weft worker
// --memory-limit: a hard limit, as a GPU's) gets a share whose weights and KV cache fit, under the
// default split and under -ts auto; a split -ts wrote is planned as written and refused at load.
// Shares never change tokens, so every run must give the one-device text.
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "parallel/memory_fit.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

namespace weft::runtime {
namespace {

using device::remote::testing_support::stories;
using device::remote::testing_support::Worker;

const std::vector<Token> kPrompt = {1, 403, 407, 261, 378};
constexpr uint64_t kLimit = 300 << 10;  // stories260K: about 0.7 MiB of weights and KV per device at an even split

EngineOptions options(const std::string& devices) {
  EngineOptions o;
  o.devices = device::parse_devices(devices);
  o.n_ctx = 128;
  o.n_batch = 16;
  return o;
}

std::vector<Token> greedy(Engine& e) {
  model::SamplingParams p;
  p.temp = 0;
  return generate(e, nullptr, kPrompt, 24, p).generated;
}

const std::vector<Token>& reference() {
  static const std::vector<Token> tokens = [] {
    auto f = gguf::File::open(stories());
    Engine e(*f, options("cpu:1"));
    return greedy(e);
  }();
  return tokens;
}

uint64_t held(const Engine& e, size_t d) {
  return parallel::device_bytes(e.plan().devices[d], {e.n_ctx() * int64_t{e.n_seq()}, DType::F16, DType::F16});
}

TEST(DeviceMemory, AWorkerWithLittleMemoryGetsTheShareThatFits) {
  reference();
  auto f = gguf::File::open(stories());
  Worker small({"--memory-limit", std::to_string(kLimit)}), big;
  Engine e(*f, options(small.url() + "," + big.url()));
  EXPECT_EQ(e.devices()[0]->memory().free_bytes, kLimit);
  EXPECT_TRUE(e.devices()[0]->memory().hard_limit);
  ASSERT_TRUE(e.plan().memory_capped(0)) << "ratio " << e.plan().ratios[0];
  EXPECT_FALSE(e.plan().memory_capped(1));
  EXPECT_EQ(e.plan().asked_ratios, (std::vector<double>{0.5, 0.5}));
  EXPECT_LE(held(e, 0), kLimit);
  EXPECT_GT(e.plan().ratios[0], 0.0);
  EXPECT_EQ(e.device_losses(), 0);
  EXPECT_EQ(greedy(e), reference());
}

TEST(DeviceMemory, TsAutoChoosesWithinTheWorkersMemory) {
  reference();
  auto f = gguf::File::open(stories());
  Worker small({"--memory-limit", std::to_string(kLimit)}), big;
  EngineOptions o = options(small.url() + "," + big.url());
  o.auto_ratios = true;
  o.rebalance.min_change = 0;  // always re-plan with what was measured
  Engine e(*f, o);
  EXPECT_EQ(e.calibration().steps, 8);
  EXPECT_TRUE(e.calibration().replanned);
  EXPECT_LE(held(e, 0), kLimit) << "ratio " << e.plan().ratios[0];
  EXPECT_EQ(e.device_losses(), 0);
  EXPECT_EQ(greedy(e), reference());
}

// -ts 1,1 says how to split: not moved; the load refuses the worker past its limit, naming it.
TEST(DeviceMemory, AWrittenSplitPastAWorkersLimitIsRefusedNamingIt) {
  auto f = gguf::File::open(stories());
  Worker small({"--memory-limit", std::to_string(kLimit)}), big;
  EngineOptions o = options(small.url() + "," + big.url());
  o.ratios = {1, 1};
  o.on_device_loss = OnDeviceLoss::Fail;
  EXPECT_ERROR(Engine(*f, o), "[device] " + small.url() + ": the plan gives it");
}

}  // namespace
}  // namespace weft::runtime
