// Device::memory, the spec-level query weft plan prints, default split ratios by kind, and the
// load refusing a plan past a device's hard memory limit.
#include "conformance_run.h"
#include "device/cpu/cpu_device.h"
#include "parallel/memory_fit.h"
#include "support/expect_error.h"

namespace weft::device {
namespace {

// A CPU device that says it holds only `free_bytes`, with a hard limit or not.
class SmallCpu : public CpuDevice {
 public:
  SmallCpu(uint64_t free_bytes, bool hard) : CpuDevice({}), free_(free_bytes), hard_(hard) {}
  DeviceMemory memory() const override { return {1 << 30, free_, hard_}; }

 private:
  uint64_t free_;
  bool hard_;
};

TEST(DeviceMemory, CpuDevicesKnowTheMachinesMemoryAndSpillRatherThanFail) {
  const auto devices = create_devices(parse_devices("cpu:1"));
  const DeviceMemory m = devices[0]->memory();
  EXPECT_TRUE(m.known());
  EXPECT_GT(m.free_bytes, 0u);
  EXPECT_LE(m.free_bytes, m.total_bytes);
  EXPECT_FALSE(m.hard_limit);
  EXPECT_EQ(spec_memory(parse_devices("cpu:1")[0]).total_bytes, m.total_bytes);
}

TEST(DeviceMemory, RemoteDevicesDoNotKnowTheirs) {
  EXPECT_FALSE(spec_memory(parse_devices("tcp://10.0.0.2:7070")[0]).known());
}

TEST(DeviceMemory, LoadRefusesAPlanPastAHardLimitNamingTheDevice) {
  const auto& m = conformance::tiny_model("tiny", "q8_0", "llama");
  const auto plan = m.plan(parallel::SplitMode::None, {1});
  ASSERT_GT(plan.devices[0].weight_bytes, 1000u);
  Devices devices;
  devices.push_back(std::make_unique<SmallCpu>(1000, /*hard=*/true));
  EXPECT_ERROR(load_devices(devices, plan.devices, *m.file, conformance::kLoad), "[device] cpu:0: the plan gives it");
  EXPECT_ERROR(load_devices(devices, plan.devices, *m.file, conformance::kLoad),
               "MiB of weights) but it has 0.0 MiB free (of 1024.0 MiB): lower its -ts share");
  devices[0] = std::make_unique<SmallCpu>(1000, /*hard=*/false);  // spills to the file mapping
  load_devices(devices, plan.devices, *m.file, conformance::kLoad);
}

// The KV cache counts too: weights that fit with no room for the cache are refused as well.
TEST(DeviceMemory, LoadCountsTheKvCacheAgainstAHardLimit) {
  const auto& m = conformance::tiny_model("tiny", "q8_0", "llama");
  const auto plan = m.plan(parallel::SplitMode::None, {1});
  const parallel::KvSizing kv{int64_t{conformance::kLoad.n_ctx} * conformance::kLoad.n_seq, conformance::kLoad.k_type,
                              conformance::kLoad.v_type};
  const uint64_t need = parallel::device_bytes(plan.devices[0], kv);
  ASSERT_GT(need, plan.devices[0].weight_bytes);
  Devices devices;
  devices.push_back(std::make_unique<SmallCpu>(plan.devices[0].weight_bytes, /*hard=*/true));
  EXPECT_ERROR(load_devices(devices, plan.devices, *m.file, conformance::kLoad), "of weights and KV cache");
  devices[0] = std::make_unique<SmallCpu>(need, /*hard=*/true);
  load_devices(devices, plan.devices, *m.file, conformance::kLoad);
}

TEST(DeviceMemory, DefaultRatiosComeFromEachKind) {
  EXPECT_EQ(default_ratios(parse_devices("cpu:3,cpu:1,tcp://10.0.0.2:7070")), (std::vector<double>{3, 1, 1}));
}

}  // namespace
}  // namespace weft::device
