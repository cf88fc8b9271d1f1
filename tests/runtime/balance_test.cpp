// The pure parts of self-balancing ratios: measurements -> speeds -> ratios, and when a running
// split is re-planned.
#include "runtime/balance.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <numeric>

namespace weft::runtime {
namespace {

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(Balance, SpeedIsBytesReadOverComputeTime) {
  EXPECT_DOUBLE_EQ(device_speed({1000, 0.5}), 2000.0);
  EXPECT_EQ(device_speed({0, 0.5}), 0.0);     // holds nothing: nothing to measure it by
  EXPECT_GT(device_speed({1000, 0.0}), 1e8);  // too fast for the clock: finite, very fast
  EXPECT_LT(device_speed({1000, 0.0}), 1e10);
}

TEST(Balance, RatiosFollowSpeeds) {
  const auto r = ratios_from_speeds(std::vector<double>{3.0, 1.0});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 0.75);
  EXPECT_DOUBLE_EQ(r[1], 0.25);
  // Units do not matter, only proportions.
  EXPECT_EQ(ratios_from_speeds(std::vector<double>{3e9, 1e9}), r);
}

TEST(Balance, RatiosAreThousandthsSummingToOne) {
  const auto r = ratios_from_speeds(std::vector<double>{1.0, 1.0, 1.0});
  EXPECT_DOUBLE_EQ(sum(r), 1.0);
  for (double x : r) EXPECT_EQ(x * 1000, std::round(x * 1000)) << x;
  // 333.33 each: the one thousandth left over goes to the largest remainder, the first on a tie.
  EXPECT_DOUBLE_EQ(r[0], 0.334);
  EXPECT_DOUBLE_EQ(r[1], 0.333);
  EXPECT_DOUBLE_EQ(r[2], 0.333);
  const auto s = ratios_from_speeds(std::vector<double>{1.0, 2.0, 4.0});  // 142.86, 285.71, 571.43
  EXPECT_DOUBLE_EQ(s[0], 0.143);
  EXPECT_DOUBLE_EQ(s[1], 0.286);
  EXPECT_DOUBLE_EQ(s[2], 0.571);
}

TEST(Balance, ASlowDeviceKeepsTheMinimumShare) {
  const auto r = ratios_from_speeds(std::vector<double>{1000.0, 1.0, 1000.0}, 0.05);
  EXPECT_DOUBLE_EQ(r[1], 0.05);
  EXPECT_DOUBLE_EQ(r[0], 0.475);  // the rest by speed
  EXPECT_DOUBLE_EQ(r[2], 0.475);
  EXPECT_DOUBLE_EQ(sum(r), 1.0);
  // Raising one device can push another under the floor: both end on it.
  const auto s = ratios_from_speeds(std::vector<double>{100.0, 1.0, 4.0}, 0.05);
  EXPECT_DOUBLE_EQ(s[1], 0.05);
  EXPECT_DOUBLE_EQ(s[2], 0.05);
  EXPECT_DOUBLE_EQ(s[0], 0.9);
  // More devices than floors fit: even shares.
  const auto e = ratios_from_speeds(std::vector<double>{1.0, 100.0, 1.0}, 0.5);
  for (double x : e) EXPECT_TRUE(x == 0.333 || x == 0.334) << x;
  EXPECT_DOUBLE_EQ(sum(e), 1.0);
}

TEST(Balance, ADeviceOfSpeedZeroGetsNothing) {
  const auto r = ratios_from_speeds(std::vector<double>{0.0, 1.0, 1.0});
  EXPECT_EQ(r[0], 0.0);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 0.5);
  const auto one = ratios_from_speeds(std::vector<double>{0.0, 7.0});
  EXPECT_EQ(one[0], 0.0);
  EXPECT_EQ(one[1], 1.0);
}

TEST(Balance, NoSpeedAtAllIsAnError) {
  EXPECT_ERROR(ratios_from_speeds(std::vector<double>{0.0, 0.0}), "no device has a measured speed");
  EXPECT_ERROR(ratios_from_speeds(std::vector<double>{}), "no device has a measured speed");
  EXPECT_ERROR(ratios_from_speeds(std::vector<double>{1.0, -1.0}), "not a number >= 0");
  EXPECT_ERROR(ratios_from_speeds(std::vector<double>{1.0, std::nan("")}), "not a number >= 0");
}

TEST(Balance, ShareChangeComparesNormalisedRatios) {
  EXPECT_DOUBLE_EQ(max_share_change(std::vector<double>{1, 1}, std::vector<double>{0.5, 0.5}), 0.0);
  EXPECT_NEAR(max_share_change(std::vector<double>{3, 1}, std::vector<double>{0.5, 0.5}), 0.25, 1e-12);
}

TEST(Balance, StragglerLagAgainstTheOthersMean) {
  size_t slowest = 99;
  const std::vector<DeviceTiming> t = {{100, 0.010}, {100, 0.015}, {100, 0.010}};
  EXPECT_NEAR(straggler_lag(t, &slowest), 0.5, 1e-12);
  EXPECT_EQ(slowest, 1u);
  // A device holding nothing is not compared (its time is the replicated part only).
  const std::vector<DeviceTiming> idle = {{100, 0.010}, {0, 0.001}, {100, 0.011}};
  EXPECT_NEAR(straggler_lag(idle, &slowest), 0.1, 1e-12);
  EXPECT_EQ(slowest, 2u);
  const std::vector<DeviceTiming> alone = {{100, 0.010}, {0, 0.0}};
  EXPECT_EQ(straggler_lag(alone, &slowest), 0.0);
  EXPECT_GE(slowest, alone.size());
}

TEST(Balance, MediansIgnoreAStraySlowStep) {
  StepTimes w;
  w.add(std::vector<double>{1.0, 2.0});
  w.add(std::vector<double>{9.0, 2.0});
  w.add(std::vector<double>{1.0, 3.0});
  EXPECT_EQ(w.steps(), 3u);
  EXPECT_EQ(w.medians(), (std::vector<double>{1.0, 2.0}));
  w.add(std::vector<double>{2.0, 1.0});
  EXPECT_EQ(w.medians(), (std::vector<double>{1.0, 2.0}));  // the lower middle of four
  w.clear();
  EXPECT_TRUE(w.medians().empty());
}

TEST(Balance, RebalanceNeedsBothLagAndChange) {
  RebalancePolicy p;
  p.lag = 0.15;
  p.min_change = 0.02;
  const std::vector<double> even = {0.5, 0.5};
  // Device 1 takes twice as long for the same bytes: it should get a third.
  const std::vector<DeviceTiming> slow = {{1000, 0.010}, {1000, 0.020}};
  const auto r = rebalanced_ratios(slow, even, p);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 0.667);
  EXPECT_DOUBLE_EQ(r[1], 0.333);
  // 10% slower: under the lag, kept.
  EXPECT_TRUE(rebalanced_ratios(std::vector<DeviceTiming>{{1000, 0.010}, {1000, 0.011}}, even, p).empty());
  // Lagging, but the ratios it implies are the current ones (within min_change).
  EXPECT_TRUE(rebalanced_ratios(slow, std::vector<double>{0.66, 0.34}, p).empty());
  // Lag 0 and change 0 re-plan on any window (the test setting).
  RebalancePolicy always{true, 4, 0.0, 0.0};
  EXPECT_EQ(rebalanced_ratios(std::vector<DeviceTiming>{{1000, 0.010}, {1000, 0.010}}, even, always), even);
  // One device at work: nothing to balance.
  EXPECT_TRUE(rebalanced_ratios(std::vector<DeviceTiming>{{1000, 0.010}, {0, 0.001}}, even, always).empty());
}

}  // namespace
}  // namespace weft::runtime
