// Fitting a split into the devices' memory (memory_fit.h): a device with a hard limit gets no more
// weights and KV cache than the limit; what it gives up goes to the others by their ratios; a
// split that fits already, or devices without limits, plan exactly as make_plan does.
#include "parallel/memory_fit.h"
#include "model/llama_graph.h"
#include "parallel/synthetic_model.h"

#include <gtest/gtest.h>

#include <numeric>

namespace weft::parallel {
namespace {

using synthetic::config;
using synthetic::Shape;
using synthetic::weights;

const Shape k500mFourLayers{2048, 4, 5632, 32, 8, 32000, DType::Q4_0};
const KvSizing kKv{4096, DType::F16, DType::F16};

struct Model {
  graph::Graph g;
  graph::WeightTable w;
  explicit Model(const Shape& s) : g(model::build_llama_graph(config(s))), w(weights(g, s.type)) {}
};

const Model& model_500m() {
  static const Model m(k500mFourLayers);
  return m;
}

using Limits = std::vector<std::optional<uint64_t>>;

TEST(MemoryFit, KvCacheBytesCountKAndVOfEveryPosition) {
  const Model& m = model_500m();
  const Plan p = make_plan(SplitMode::None, m.g, m.w, {1});
  // 4 layers x 8 kv heads x 64 values, K and V in f16, 4096 positions.
  EXPECT_EQ(kv_cache_bytes(p.devices[0], kKv), uint64_t{4} * 8 * 64 * 2 * 2 * 4096);
  EXPECT_EQ(kv_cache_bytes(p.devices[0], {4096, DType::F32, DType::F16}), uint64_t{4} * 8 * 64 * (4 + 2) * 4096);
  EXPECT_EQ(device_bytes(p.devices[0], kKv), p.devices[0].weight_bytes + kv_cache_bytes(p.devices[0], kKv));
}

TEST(MemoryFit, WithoutLimitsOrWithRoomTheSplitIsMakePlans) {
  const Model& m = model_500m();
  for (const SplitMode mode : {SplitMode::Tensor, SplitMode::Layer}) {
    const Plan want = make_plan(mode, m.g, m.w, {1, 1});
    const uint64_t need = device_bytes(want.devices[0], kKv);
    for (const Limits& limits : {Limits{std::nullopt, std::nullopt}, Limits{need, std::nullopt}, Limits{need, need}}) {
      const Plan p = plan_within_memory(mode, m.g, m.w, {1, 1}, MoeSplit::Auto, limits, kKv);
      EXPECT_EQ(p.ratios, want.ratios);
      EXPECT_TRUE(p.asked_ratios.empty());
      EXPECT_FALSE(p.memory_capped(0) || p.memory_capped(1));
      EXPECT_EQ(p.devices[0].weight_bytes, want.devices[0].weight_bytes);
    }
  }
}

// A device with room for about a quarter of the model, asked for half: it gets the largest share
// that fits, and the others share the rest in their own proportions.
TEST(MemoryFit, ADeviceOverItsLimitIsCappedAndTheOthersTakeTheRest) {
  const Model& m = model_500m();
  for (const SplitMode mode : {SplitMode::Tensor, SplitMode::Layer}) {
    SCOPED_TRACE(std::string(split_mode_name(mode)));
    const std::vector<double> ratios = {2, 1, 1};
    const Plan asked = make_plan(mode, m.g, m.w, ratios);
    const uint64_t limit = device_bytes(asked.devices[0], kKv) / 2;
    const Plan p = plan_within_memory(mode, m.g, m.w, ratios, MoeSplit::Auto, {limit, std::nullopt, std::nullopt}, kKv);
    EXPECT_LE(device_bytes(p.devices[0], kKv), limit);
    EXPECT_TRUE(p.memory_capped(0));
    EXPECT_FALSE(p.memory_capped(1) || p.memory_capped(2));
    EXPECT_EQ(p.asked_ratios, asked.ratios);
    EXPECT_LT(p.ratios[0], 0.5);
    EXPECT_GT(p.ratios[0], 0.1) << "capped far below what fits";
    EXPECT_NEAR(p.ratios[1], p.ratios[2], 1e-12) << "the others keep their proportions";
    EXPECT_NEAR(std::accumulate(p.ratios.begin(), p.ratios.end(), 0.0), 1.0, 1e-9);
    // The largest share in thousandths: one more thousandth would not fit (or would change nothing).
    const double next = p.ratios[0] + 0.001;
    const Plan more = make_plan(mode, m.g, m.w, {next, (1 - next) / 2, (1 - next) / 2});
    EXPECT_TRUE(device_bytes(more.devices[0], kKv) > limit ||
                more.devices[0].weight_bytes == p.devices[0].weight_bytes);
  }
}

// Two limited devices: the one that receives more than it holds is capped in its turn.
TEST(MemoryFit, ADeviceThatReceivesPastItsLimitIsCappedToo) {
  const Model& m = model_500m();
  const Plan even = make_plan(SplitMode::Tensor, m.g, m.w, {1, 1, 1});
  const uint64_t third = device_bytes(even.devices[0], kKv);
  const Limits limits = {third / 2, third + third / 10, std::nullopt};
  const Plan p = plan_within_memory(SplitMode::Tensor, m.g, m.w, {1, 1, 1}, MoeSplit::Auto, limits, kKv);
  ASSERT_FALSE(p.asked_ratios.empty());
  for (size_t d = 0; d < 2; ++d) EXPECT_LE(device_bytes(p.devices[d], kKv), *limits[d]) << "device " << d;
  EXPECT_TRUE(p.memory_capped(0));
  EXPECT_GT(p.ratios[2], p.ratios[1]) << "the device without a limit takes the most";
}

// No split fits: the plan asked for comes back unchanged (the load then refuses, naming the device).
TEST(MemoryFit, WhenNothingFitsThePlanIsTheOneAsked) {
  const Model& m = model_500m();
  const std::vector<double> ratios = {1, 1};
  const Plan asked = make_plan(SplitMode::Tensor, m.g, m.w, ratios);
  // Every device limited far below its part: nobody to take what one gives up.
  Plan p = plan_within_memory(SplitMode::Tensor, m.g, m.w, ratios, MoeSplit::Auto, {1000, 1000}, kKv);
  EXPECT_EQ(p.ratios, asked.ratios);
  EXPECT_TRUE(p.asked_ratios.empty());
  // One device cannot hold even what every device holds (replicated norms) at share 0.
  p = plan_within_memory(SplitMode::Tensor, m.g, m.w, ratios, MoeSplit::Auto, {1, std::nullopt}, kKv);
  EXPECT_EQ(p.ratios, asked.ratios);
  // One device alone: nothing to move.
  p = plan_within_memory(SplitMode::None, m.g, m.w, {1}, MoeSplit::Auto, {1000}, kKv);
  EXPECT_TRUE(p.asked_ratios.empty());
}

// A device with ratio 0 receives nothing: what a capped device gives up goes by the ratios.
TEST(MemoryFit, ADeviceWithRatioZeroStaysEmpty) {
  const Model& m = model_500m();
  const std::vector<double> ratios = {1, 0, 1};
  const Plan asked = make_plan(SplitMode::Tensor, m.g, m.w, ratios);
  const uint64_t limit = device_bytes(asked.devices[0], kKv) * 3 / 4;
  const Plan p =
      plan_within_memory(SplitMode::Tensor, m.g, m.w, ratios, MoeSplit::Auto, {limit, std::nullopt, std::nullopt}, kKv);
  EXPECT_TRUE(p.memory_capped(0));
  EXPECT_EQ(p.ratios[1], 0.0);
  EXPECT_GT(p.ratios[2], 0.5);
}

}  // namespace
}  // namespace weft::parallel
