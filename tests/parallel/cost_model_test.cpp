// The cost model's arithmetic on real plans of a 500m-shaped model: each term checked against a
// hand count from the plan (bytes per device, collectives per layer, message sizes).
#include "parallel/cost_model.h"
#include "parallel/planner.h"
#include "parallel/synthetic_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

namespace weft::parallel {
namespace {

const synthetic::Shape k500m{2048, 8, 5632, 32, 8, 32000, DType::Q4_0};

Plan plan_of(SplitMode mode, std::vector<double> ratios) {
  const auto g = model::build_llama_graph(synthetic::config(k500m));
  return make_plan(mode, g, synthetic::weights(g, k500m.type), ratios);
}

TEST(CostModel, SmallAllReduceIsOneMessageLargeOneIsARing) {
  const LinkCost link{100e-6, 1e9, 64 * 1024};
  const StepCost small = all_reduce_cost(8192, 3, link);
  EXPECT_EQ(small.messages, 1);
  EXPECT_DOUBLE_EQ(small.wire_bytes, 2 * 8192.0);
  EXPECT_DOUBLE_EQ(small.link_s, 100e-6 + 2 * 8192.0 / 1e9);
  const StepCost big = all_reduce_cost(1 << 20, 2, link);  // 512 KiB segments: 8 messages a hop
  EXPECT_EQ(big.messages, 2 * 1 * 8);
  EXPECT_DOUBLE_EQ(big.wire_bytes, double(1 << 20));
  EXPECT_EQ(all_reduce_cost(1 << 20, 1, link).messages, 0);
}

TEST(CostModel, TensorSplitPaysTwoAllReducesPerLayerAndRunsDevicesAtOnce) {
  const Plan p = plan_of(SplitMode::Tensor, {1, 1});
  const LinkCost link{50e-6, 1.25e9, 64 * 1024};
  const StepCost c = estimate_decode_step(p, {10e9, 10e9}, link, WireType::F32);
  const double slowest = std::max(p.devices[0].decode_bytes, p.devices[1].decode_bytes) / 10e9;
  EXPECT_DOUBLE_EQ(c.compute_s, slowest);
  ASSERT_EQ(p.collectives.size(), 2u * k500m.n_layer);  // dense: two per layer, logits not gathered
  EXPECT_EQ(c.messages, 2 + 2 * k500m.n_layer);         // the step's round trip; 8 KiB each: one message
  EXPECT_DOUBLE_EQ(c.wire_bytes, 2.0 * k500m.n_layer * 2048 * 4);
  EXPECT_NEAR(c.link_s, 2 * 50e-6 + 2 * k500m.n_layer * (50e-6 + 2048 * 4 / 1.25e9), 1e-12);
  // bf16 halves the bytes, not the messages; 16 tokens pass one message and take the ring.
  const StepCost h = estimate_decode_step(p, {10e9, 10e9}, link, WireType::BF16);
  EXPECT_DOUBLE_EQ(h.wire_bytes, c.wire_bytes / 2);
  EXPECT_EQ(h.messages, c.messages);
  const StepCost b16 = estimate_decode_step(p, {10e9, 10e9}, link, WireType::F32, 16);
  EXPECT_EQ(b16.messages, 2 + 2 * k500m.n_layer * 2);  // 128 KiB: two 64 KiB hops
  EXPECT_DOUBLE_EQ(b16.compute_s, c.compute_s);        // weights read once per step, whatever the batch
}

TEST(CostModel, LayerSplitRunsDevicesInTurnAndHandsOffThroughTheCoordinator) {
  const Plan p = plan_of(SplitMode::Layer, {1, 1, 2});
  const LinkCost link{200e-6, 125e6, 64 * 1024};
  const StepCost c = estimate_decode_step(p, {5e9, 10e9, 20e9}, link, WireType::F32);
  EXPECT_DOUBLE_EQ(c.compute_s, p.devices[0].decode_bytes / 5e9 + p.devices[1].decode_bytes / 10e9 +
                                    p.devices[2].decode_bytes / 20e9);
  EXPECT_EQ(c.messages, 6);                            // three devices: a step message and a reply each
  EXPECT_DOUBLE_EQ(c.wire_bytes, 2 * 2 * 2048 * 4.0);  // two boundaries, in and out of the coordinator
  EXPECT_DOUBLE_EQ(c.link_s, 6 * 200e-6 + 4 * 2048 * 4 / 125e6);
}

TEST(CostModel, SlowLinksFavourTheLayerSplitFastOnesTheTensorSplit) {
  const Plan t = plan_of(SplitMode::Tensor, {1, 1}), l = plan_of(SplitMode::Layer, {1, 1});
  const std::vector<double> speed = {40e9, 40e9};
  const LinkCost loopback{25e-6, 5e9, 64 * 1024}, wan{5e-3, 12.5e6, 64 * 1024};
  EXPECT_LT(estimate_decode_step(t, speed, loopback, WireType::F32).total_s(),
            estimate_decode_step(l, speed, loopback, WireType::F32).total_s());
  EXPECT_GT(estimate_decode_step(t, speed, wan, WireType::F32).total_s(),
            estimate_decode_step(l, speed, wan, WireType::F32).total_s());
}

TEST(CostModel, RejectsMissingOrZeroSpeeds) {
  const Plan p = plan_of(SplitMode::Tensor, {1, 1});
  EXPECT_ERROR(estimate_decode_step(p, {1e9}, LinkCost{}, WireType::F32), "1 device speeds for 2 devices");
  EXPECT_ERROR(estimate_decode_step(p, {1e9, 0}, LinkCost{}, WireType::F32), "must be > 0");
}

}  // namespace
}  // namespace weft::parallel
