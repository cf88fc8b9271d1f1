// vk: devices from the command line. With Vulkan in the build (WEFT_TEST_VULKAN, from
// tests/CMakeLists.txt), `weft run` on a vk device and a CPU device prints one CPU device's text,
// under the validation layer (whose messages would be in the run's stderr). Without it, asking
// for vk: says that this build has no Vulkan and what to install.
#include "cli/cli_run.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#ifndef WEFT_TEST_VULKAN
#define WEFT_TEST_VULKAN 0
#endif

namespace weft::test_cli {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

#if WEFT_TEST_VULKAN
// stdout and stderr of a greedy `weft run` of the tiny model on `devices`, the layer on.
struct RunOutput {
  int code;
  std::string out, err;
};
RunOutput greedy_run(const std::string& devices) {
  const std::string base = testing::TempDir() + "/weft_cli_vk_" + std::to_string(::getpid());
  const std::string cmd = "WEFT_VK_VALIDATION=1 " + std::string(WEFT_BINARY) +
                          " run --temp 0 -n 16 -p 'Once upon a time' -m " + tiny_model() + " --devices " + devices +
                          " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  RunOutput r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_all(base + ".out"), read_all(base + ".err")};
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

TEST(CliVulkan, RunOnAVkDeviceAndACpuDevicePrintsOneCpuDevicesText) {
  const RunOutput cpu = greedy_run("cpu:1");
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  ASSERT_FALSE(cpu.out.empty());
  const RunOutput vk = greedy_run("vk:0,cpu:1");
  ASSERT_EQ(vk.code, 0) << vk.err;
  EXPECT_EQ(vk.out, cpu.out);
  EXPECT_NE(vk.err.find("2 devices, split tensor"), std::string::npos) << vk.err;
  EXPECT_EQ(vk.err.find("vulkan validation:"), std::string::npos) << vk.err;
}

// A device index past the machine's: one clear line that names the device once.
TEST(CliVulkan, AMissingVkDeviceIsNamedOnce) {
  const auto r = run("run -n 1 -p hi -m " + tiny_model() + " --devices vk:57", true);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("[vulkan] vk:57: this machine has "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("vk:57: vk:57"), std::string::npos) << r.out;
}
#else
TEST(CliVulkan, ABuildWithoutVulkanSaysSoWhenVkIsAskedFor) {
  const auto r = run("run -n 1 -p hi -m " + tiny_model() + " --devices vk:0", true);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("'vk:0': this weft was built without Vulkan (libvulkan-dev and glslc were missing"),
            std::string::npos)
      << r.out;
  const auto info = run("info --devices");
  EXPECT_NE(info.out.find("vk: this build has no Vulkan support"), std::string::npos) << info.out;
}
#endif

}  // namespace
}  // namespace weft::test_cli
