// choose_group (device_group.h): a group's collective backend as a function of where its devices
// compute and of what kind. Devices of any kind in this process share memory (a GPU stages its
// collectives through host memory); any device behind a connection puts every rank on the network.
#include "device/device_group.h"
#include "device/cpu/cpu_device.h"

#include <gtest/gtest.h>

namespace weft::device {
namespace {

const Reach kCpu{true, "", "cpu"}, kVk{true, "", "vk"};
Reach worker(const std::string& local_host, const std::string& kind) { return {false, local_host, kind}; }

TEST(DeviceGroup, DevicesInThisProcessShareMemoryWhateverTheirKind) {
  for (const std::vector<Reach>& reaches : {std::vector<Reach>{kCpu, kCpu}, {kCpu, kVk}, {kVk, kVk}, {kVk}}) {
    const GroupChoice c = choose_group(reaches, std::vector<int>(reaches.size(), 3));
    EXPECT_EQ(c.backend, GroupBackend::SharedMemory);
    EXPECT_EQ(c.local_threads, 3 * static_cast<int>(reaches.size()));
    EXPECT_EQ(c.host, "");
  }
}

TEST(DeviceGroup, ADeviceBehindAConnectionPutsEveryRankOnTheNetwork) {
  const std::vector<Reach> reaches = {kCpu, worker("10.0.0.1", "vk"), kVk, worker("192.168.1.5", "")};
  const GroupChoice c = choose_group(reaches, std::vector<int>{4, 1, 1, 8});
  EXPECT_EQ(c.backend, GroupBackend::Network);
  EXPECT_EQ(c.host, "10.0.0.1") << "the interface that reaches the first worker serves the rendezvous";
  EXPECT_EQ(c.local_threads, 5) << "only the threads computing in this process";
  const GroupChoice workers =
      choose_group(std::vector<Reach>{worker("127.0.0.1", "cpu"), worker("127.0.0.1", "cpu")}, std::vector<int>{2, 2});
  EXPECT_EQ(workers.backend, GroupBackend::Network);
  EXPECT_EQ(workers.local_threads, 0);
}

TEST(DeviceGroup, LocalDevicesSayTheirKind) {
  const Reach r = CpuDevice({}).reach();
  EXPECT_TRUE(r.in_process);
  EXPECT_EQ(r.kind, "cpu");
}

}  // namespace
}  // namespace weft::device
