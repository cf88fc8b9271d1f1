// -ts auto, --rebalance and weft plan --calibrate from the command line: what they print, and
// that the generated text is the default split's. Timings are printed, never asserted.
#include "cli/cli_run.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using weft::test_cli::run;
using weft::test_cli::tiny_model;

const std::string kArgs = " -p \"a b c\" -n 24 --temp 0 --devices cpu:1,cpu:1";

std::vector<double> numbers(const std::string& list) {
  std::vector<double> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stod(item));
  return out;
}

TEST(TensorSplitAuto, PlanCalibratePrintsARowPerDeviceAndTheRatios) {
  const auto r = run("plan -m " + tiny_model() + " --devices cpu:1,cpu:1,cpu:1 --calibrate");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("calibration: 8 decode steps on the starting split"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("| device | threads | share | read per token | compute ms/step | link ms/step | speed | ratio |"),
      std::string::npos)
      << r.out;
  for (const std::string row : {"| #0 cpu:0 | 1 | 0.333 |", "| #1 cpu:1 | 1 | 0.333 |", "| #2 cpu:2 | 1 | 0.333 |"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("chosen ratios: -ts ([0-9.,]+) \\(")));
  const auto ratios = numbers(m[1]);
  ASSERT_EQ(ratios.size(), 3u) << m[1];
  EXPECT_NEAR(ratios[0] + ratios[1] + ratios[2], 1.0, 1e-9);
  // The plan's table follows, over the same three devices.
  EXPECT_NE(r.out.find("| #2 cpu:1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("collectives per token:"), std::string::npos) << r.out;
}

TEST(TensorSplitAuto, PlanWithTsAutoCalibrates) {
  const auto r = run("plan -m " + tiny_model() + " --devices cpu:1,cpu:1 -ts auto");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chosen ratios: -ts "), std::string::npos) << r.out;
}

TEST(TensorSplitAuto, RunPrintsWhatTheDefaultSplitPrints) {
  const auto even = run("run -m " + tiny_model() + kArgs);
  ASSERT_EQ(even.code, 0);
  // Re-planned whatever it measures (min change 0), so the reloaded split is the one generating.
  const auto automatic = run("run -m " + tiny_model() + kArgs + " -ts auto --rebalance-min-change 0");
  ASSERT_EQ(automatic.code, 0);
  EXPECT_EQ(automatic.out, even.out);
  const auto err = run("run -m " + tiny_model() + kArgs + " -ts auto --rebalance-min-change 0", true);
  EXPECT_NE(err.out.find("[engine] calibration over 8 decode steps: cpu:0 (1 thread, share 0.500): compute "),
            std::string::npos)
      << err.out;
  EXPECT_NE(err.out.find("[engine] -ts auto: ratios "), std::string::npos) << err.out;
  EXPECT_NE(err.out.find("(re-planning)"), std::string::npos) << err.out;
}

TEST(TensorSplitAuto, ForcedRebalanceReplansAndKeepsTheText) {
  const std::string forced = " --rebalance --rebalance-window 4 --rebalance-lag 0 --rebalance-min-change 0";
  const auto even = run("run -m " + tiny_model() + kArgs);
  const auto rebalanced = run("run -m " + tiny_model() + kArgs + forced);
  ASSERT_EQ(rebalanced.code, 0);
  EXPECT_EQ(rebalanced.out, even.out);
  const auto err = run("run -m " + tiny_model() + kArgs + forced, true);
  EXPECT_NE(err.out.find("[engine] rebalance: "), std::string::npos) << err.out;
  EXPECT_NE(err.out.find(" lags the others by "), std::string::npos) << err.out;
}

TEST(TensorSplitAuto, RebalanceIsInTheHelpAndItsKnobsAreNot) {
  const auto r = run("run --help");
  EXPECT_NE(r.out.find("--rebalance "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--rebalance-lag"), std::string::npos) << r.out;
}

}  // namespace
