// Gpu's timestamp marks (per-op GPU time in DeviceStats) and the memory-bandwidth probe, on vk:0
// (lavapipe in CI). Where the queue writes no timestamps the timed checks have nothing to check.
#include "device/vulkan/vk_gpu.h"
#include "device/conformance_run.h"
#include "device/vulkan/vk_memory_read.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace weft::device::vk {
namespace {

struct FillPush {
  uint32_t n, stride;
};

// mem_fill over a buffer of n uvec4s: work that takes measurable time.
void record_fill(Gpu& gpu, Buffer& data, Buffer& sums, uint32_t n) {
  const Pipeline& p = gpu.pipeline("mem_fill", 2, sizeof(FillPush));
  const FillPush push{n, 64 * 256};
  gpu.dispatch(p, gpu.bind(p, {data.buffer, sums.buffer}), &push, 64);
}

TEST(VkGpuMarks, SpansSumPerTagAndResumeAfterASubmit) {
  Gpu gpu(0);
  if (!gpu.timestamps()) GTEST_SKIP() << gpu.info().name << " writes no timestamps on its compute queue";
  const uint32_t n = 1 << 20;  // 16 MiB
  Buffer data = gpu.create_buffer(uint64_t{n} * 16, Memory::Device, "test data");
  Buffer sums = gpu.create_buffer(64 * 4, Memory::Device, "test sums");
  gpu.reserve_marks(4);
  gpu.begin();
  gpu.mark(2);
  record_fill(gpu, data, sums, n);
  gpu.barrier();
  gpu.mark(5);
  gpu.fill_zero(data.buffer, 0, 4096);
  gpu.submit();
  // Tag 5 stays current: the next recording starts with a span of it (a step after a collective).
  gpu.begin();
  gpu.barrier();
  record_fill(gpu, data, sums, n);
  gpu.barrier();
  gpu.mark(-1);
  gpu.fill_zero(data.buffer, 0, 4096);  // untimed
  gpu.submit();
  const std::vector<double> s = gpu.take_seconds();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_GT(s[2], 0);
  EXPECT_GT(s[5], 0);
  for (int untimed : {0, 1, 3, 4}) EXPECT_EQ(s[untimed], 0) << untimed;
  EXPECT_LT(s[2] + s[5], 10.0);
  EXPECT_TRUE(gpu.take_seconds().empty()) << "taken once";
  gpu.destroy(data);
  gpu.destroy(sums);
}

TEST(VkGpuMarks, MarksPastTheReservationGrowTheSpanBeforeThem) {
  Gpu gpu(0);
  if (!gpu.timestamps()) GTEST_SKIP() << gpu.info().name << " writes no timestamps on its compute queue";
  Buffer data = gpu.create_buffer(uint64_t{1} << 20, Memory::Device, "test data");
  Buffer sums = gpu.create_buffer(64 * 4, Memory::Device, "test sums");
  gpu.reserve_marks(1);
  gpu.begin();
  for (int tag = 0; tag < 8; ++tag) {
    gpu.mark(tag);
    record_fill(gpu, data, sums, (1 << 20) / 16);
    gpu.barrier();
  }
  gpu.submit();
  // A fresh recording has no resumed span, so its slot takes a second mark: tags 0 and 1 are
  // timed, and 1's span runs on over the dropped marks to the end.
  const std::vector<double> s = gpu.take_seconds();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_GT(s[0], 0);
  EXPECT_GT(s[1], 0);
  gpu.destroy(data);
  gpu.destroy(sums);
}

TEST(VkMemoryRead, ReadsWholePagesAtAPlausibleRate) {
  VkMemoryRead probe(0, (uint64_t{64} << 20) + 123);
  EXPECT_EQ(probe.bytes() % 4096, 0u);
  EXPECT_LE(probe.bytes(), uint64_t{64} << 20);
  EXPECT_GT(probe.bytes(), 0u);
  EXPECT_FALSE(probe.device_name().empty());
  for (int i = 0; i < 3; ++i) {
    const double bps = probe.read();
    EXPECT_TRUE(std::isfinite(bps));
    EXPECT_GT(bps, 1e8) << "under 100 MB/s";  // lavapipe on one core reads GB/s
    EXPECT_LT(bps, 1e14) << "over 100 TB/s";  // no GPU memory does
  }
}

TEST(VkMemoryRead, ABadIndexNamesTheDevice) { EXPECT_ERROR(VkMemoryRead(63, 1 << 20), "vk:63"); }

// A step on a vk: device puts its ops' GPU time in DeviceStats::op_seconds (weft bench --profile).
TEST(VkDeviceStats, AStepTimesItsOpsOnTheGpu) {
  const auto& m = conformance::tiny_model("tiny", "q8_0", "llama");
  Devices d = create_devices(parse_devices("vk:0"));
  const auto plan = m.plan(parallel::SplitMode::None, {1});
  conformance::run_scenario(d, plan, m, conformance::scenario());
  const DeviceStats s = d[0]->stats();
  EXPECT_EQ(s.steps, 2u);
  if (!Gpu(0).timestamps()) GTEST_SKIP() << "no timestamps: op times stay unmeasured";
  double sum = 0;
  for (double v : s.op_seconds) {
    EXPECT_GE(v, 0);
    sum += v;
  }
  EXPECT_GT(s.op_seconds[static_cast<size_t>(parallel::LocalOp::MatMul)], 0);
  EXPECT_GT(s.op_seconds[static_cast<size_t>(parallel::LocalOp::Attention)], 0);
  EXPECT_LE(sum, s.step_seconds * 1.01) << "GPU time inside the steps' wall time";
}

}  // namespace
}  // namespace weft::device::vk
