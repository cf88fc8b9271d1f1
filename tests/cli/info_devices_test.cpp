// weft info --devices: every registered kind says what this machine offers.
#include "cli/cli_run.h"

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

}  // namespace
}  // namespace weft::test_cli
