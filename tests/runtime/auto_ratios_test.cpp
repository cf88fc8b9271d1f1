// Self-balancing ratios on real devices: -ts auto's calibration at load and --rebalance's re-plans,
// in process and with a worker. Ratios never change tokens, so every run here must print what the
// default split prints, whatever the machine measured; timings are reported, never asserted.
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/generate.h"

#include <gtest/gtest.h>

#include <numeric>

namespace weft::runtime {
namespace {

using device::remote::testing_support::stories;
using device::remote::testing_support::Worker;

const std::vector<Token> kPrompt = {1, 403, 407, 261, 378};

EngineOptions options(const std::string& devices, parallel::SplitMode mode = parallel::SplitMode::Tensor) {
  EngineOptions o;
  o.devices = device::parse_devices(devices);
  o.mode = mode;
  o.n_ctx = 128;
  o.n_batch = 16;
  return o;
}

std::vector<Token> greedy(Engine& e, int n = 40) {
  model::SamplingParams p;
  p.temp = 0;
  return generate(e, nullptr, kPrompt, n, p).generated;
}

const std::vector<Token>& reference() {
  static const std::vector<Token> tokens = [] {
    auto f = gguf::File::open(stories());
    Engine e(*f, options("cpu:1,cpu:1"));
    return greedy(e);
  }();
  return tokens;
}

// -ts auto, re-planning whatever it measured (min change 0): the split moves, the tokens do not.
EngineOptions auto_options(const std::string& devices, parallel::SplitMode mode = parallel::SplitMode::Tensor) {
  EngineOptions o = options(devices, mode);
  o.auto_ratios = true;
  o.rebalance.min_change = 0;
  return o;
}

void expect_calibrated(const Engine& e, size_t n_devices) {
  const Calibration& c = e.calibration();
  EXPECT_EQ(c.steps, 8);
  ASSERT_EQ(c.devices.size(), n_devices);
  ASSERT_EQ(c.ratios.size(), n_devices);
  EXPECT_NEAR(std::accumulate(c.ratios.begin(), c.ratios.end(), 0.0), 1.0, 1e-9);
  EXPECT_TRUE(c.replanned);
  for (size_t i = 0; i < n_devices; ++i) {
    EXPECT_EQ(c.devices[i].name, e.devices()[i]->name());
    EXPECT_GT(c.devices[i].decode_bytes, 0u);
    EXPECT_NEAR(e.plan().ratios[i], c.ratios[i], 1e-9) << "the plan is not the chosen ratios'";
  }
}

TEST(AutoRatios, InProcessDevicesKeepTheTokens) {
  auto f = gguf::File::open(stories());
  Engine e(*f, auto_options("cpu:1,cpu:1"));
  expect_calibrated(e, 2);
  EXPECT_EQ(greedy(e), reference());
}

TEST(AutoRatios, LayerSplitKeepsTheTokens) {
  auto f = gguf::File::open(stories());
  Engine e(*f, auto_options("cpu:1,cpu:1", parallel::SplitMode::Layer));
  expect_calibrated(e, 2);
  EXPECT_EQ(greedy(e), reference());
}

// Beside a worker: the worker is re-planned in a new session (its old one ends first).
TEST(AutoRatios, WorkerKeepsTheTokens) {
  reference();
  auto f = gguf::File::open(stories());
  Worker w;
  Engine e(*f, auto_options("cpu:1," + w.url()));
  expect_calibrated(e, 2);
  EXPECT_EQ(e.calibration().devices[1].name, w.url());
  EXPECT_EQ(greedy(e), reference());
}

// weft run with a worker: -ts auto prints what the default split prints.
TEST(AutoRatios, WeftRunBesideAWorkerPrintsTheDefaultText) {
  using device::remote::testing_support::greedy_text;
  Worker w;
  const std::string devices = "cpu:1," + w.url();
  const std::string even = greedy_text(stories(), devices);
  EXPECT_NE(even.find("exit=0"), std::string::npos) << even;
  EXPECT_EQ(greedy_text(stories(), devices, "-ts auto --rebalance-min-change 0"), even);
  EXPECT_EQ(greedy_text(stories(), devices, "-ts auto"), even);
}

// Close enough (the default min change, against a split measured as itself): kept, no reload.
TEST(AutoRatios, OneDeviceIsMeasuredAndKept) {
  auto f = gguf::File::open(stories());
  EngineOptions o = options("cpu:1", parallel::SplitMode::None);
  o.auto_ratios = true;
  Engine e(*f, o);
  ASSERT_EQ(e.calibration().devices.size(), 1u);
  EXPECT_EQ(e.calibration().ratios, std::vector<double>{1.0});
  EXPECT_FALSE(e.calibration().replanned);
  EXPECT_EQ(greedy(e), reference());
}

TEST(AutoRatios, NoTimedStepKeepsTheRatios) {
  auto f = gguf::File::open(stories());
  EngineOptions o = options("cpu:1,cpu:1");
  o.auto_ratios = true;
  o.calibration_steps = 0;
  Engine e(*f, o);
  EXPECT_EQ(e.calibration().steps, 0);
  EXPECT_EQ(e.plan().ratios, (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(greedy(e), reference());
}

// --rebalance forced to re-plan on every window of 4 steps (lag 0, min change 0): each re-plan
// reloads the devices and replays what the slot holds, mid-generation.
EngineOptions rebalancing(const std::string& devices) {
  EngineOptions o = options(devices);
  o.rebalance = {true, 4, 0.0, 0.0};
  return o;
}

TEST(Rebalance, ForcedReplansKeepTheTokens) {
  auto f = gguf::File::open(stories());
  Engine e(*f, rebalancing("cpu:1,cpu:1"));
  EXPECT_EQ(greedy(e), reference());
  EXPECT_GE(e.rebalances(), 2);
  EXPECT_EQ(e.devices().size(), 2u);
  EXPECT_EQ(e.device_losses(), 0);
}

TEST(Rebalance, ForcedReplansBesideAWorkerKeepTheTokens) {
  reference();
  auto f = gguf::File::open(stories());
  Worker w;
  Engine e(*f, rebalancing("cpu:1," + w.url()));
  EXPECT_EQ(greedy(e), reference());
  EXPECT_GE(e.rebalances(), 2);
  ASSERT_EQ(e.devices().size(), 2u);
  EXPECT_EQ(e.devices()[1]->name(), w.url());
}

// The default policy on two equal devices: whatever it decides, the tokens stay.
TEST(Rebalance, DefaultPolicyKeepsTheTokens) {
  auto f = gguf::File::open(stories());
  EngineOptions o = options("cpu:1,cpu:1");
  o.rebalance.enabled = true;
  o.rebalance.window = 8;
  Engine e(*f, o);
  EXPECT_EQ(greedy(e), reference());
}

TEST(Rebalance, OffByDefault) {
  auto f = gguf::File::open(stories());
  EngineOptions o = rebalancing("cpu:1,cpu:1");
  o.rebalance.enabled = false;
  Engine e(*f, o);
  EXPECT_EQ(greedy(e), reference());
  EXPECT_EQ(e.rebalances(), 0);
}

}  // namespace
}  // namespace weft::runtime
