// weft info --devices: every registered kind says what this machine offers.
#include "cli/cli_run.h"
#include "device/worker_process.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace weft::test_cli {
namespace {

TEST(CliInfoDevices, ListsTheCoresNumaNodesAndHowToNameAWorker) {
  const auto r = run("info --devices");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cpu: " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores"), std::string::npos) << r.out;
  if (std::filesystem::exists("/sys/devices/system/node/node0")) {
    EXPECT_NE(r.out.find("NUMA node 0: cores 0"), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("tcp://HOST:PORT"), std::string::npos) << r.out;
}

TEST(CliInfoDevices, InfoNeedsAFileOrDevicesButNotBoth) {
  auto r = run("info", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("name a GGUF file, or --devices"), std::string::npos) << r.out;
  r = run("info --devices " + tiny_model(), true);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
}

TEST(CliInfoDevices, PlanPrintsEachDevicesMemory) {
  const auto r = run("plan -m " + tiny_model() + " --devices cpu:1,tcp://127.0.0.1:1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("device memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  #0 cpu:1: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" MiB of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  #1 tcp://127.0.0.1:1: unknown"), std::string::npos) << r.out;
}

// A worker that holds little (--memory-limit: a hard limit, as a GPU's): weft plan --calibrate
// connects, and its memory section says the worker's share was capped to fit.
TEST(CliInfoDevices, PlanSaysWhenMemoryCappedAShare) {
  using device::remote::testing_support::stories;
  using device::remote::testing_support::Worker;
  Worker small({"--memory-limit", "300K"}), big;
  const auto r =
      run("plan -m " + stories() + " -c 128 --net-poll block --calibrate --devices " + small.url() + "," + big.url());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  #0 " + small.url() + ": 0.29 MiB of 0.29 MiB (a hard limit); the plan puts 0."),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" there: share capped by memory at 0."), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  #1 " + big.url() + ": unknown"), std::string::npos) << "a worker says its memory: " << r.out;
}

}  // namespace
}  // namespace weft::test_cli
