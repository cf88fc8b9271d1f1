// What a remote device knows of its worker's device (the DeviceInfo frame): a worker says what it
// serves as its session's first frame, so RemoteDevice::supports and ::memory are that device's;
// a hostile DeviceInfo fails the connect, named.
#include "conformance_run.h"
#include "device/cpu/cpu_device.h"
#include "device/device_spec.h"
#include "device/remote/remote_device.h"
#include "device/remote/worker_discovery.h"
#include "net/channel.h"
#include "net/handshake.h"
#include "parallel/memory_fit.h"
#include "support/expect_error.h"
#include "worker_process.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <thread>

namespace weft::device::remote {
namespace {

using Bytes = std::vector<uint8_t>;
using parallel::LocalOp;

// A worker in a thread that speaks the handshake as `version`, sends `info` (when given) as a
// DeviceInfo frame, then waits for the coordinator's Bye or close. It serves nothing else.
class FakeWorker {
 public:
  FakeWorker(net::Version version, std::optional<Bytes> info) : listener_({"127.0.0.1", 0}) {
    thread_ = std::thread([this, version, info = std::move(info)] {
      net::Socket s = listener_.accept(5000);
      if (!s.valid()) return;
      try {
        net::SessionMac mac = net::server_handshake(s, {}, 3000, {}, version, &coordinator_);
        net::Channel ch(std::move(s), std::move(mac));
        if (info) ch.send(net::MsgType::DeviceInfo, *info, 1000);
        ch.recv(5000, 5000);
      } catch (const Error&) {  // the coordinator refused what it was told and closed
      }
    });
  }
  ~FakeWorker() { join(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(listener_.port()); }
  // The version the coordinator's hello said (after join).
  net::Version coordinator() {
    join();
    return coordinator_;
  }

 private:
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  net::Listener listener_;
  net::Version coordinator_{0, 0};
  std::thread thread_;
};

// What a worker serving a small GPU says: f32/f16/q8_0 matmuls, 1 GiB of which 768 MiB free, a hard limit.
ServedDevice gpu_like() {
  ServedDevice d;
  d.name = "vk:0";
  d.memory = {1u << 30, 768u << 20, true};
  for (auto& types : d.weight_types)
    for (DType t : {DType::F32, DType::F16, DType::Q8_0}) types.set(static_cast<uint32_t>(t));
  return d;
}

Bytes bytes_of(const ServedDevice& d) {
  net::ByteWriter w;
  write_served_device(w, d);
  return std::move(w.data());
}

void expect_cpu_kernels(const Device& d) {
  for (int op = 0; op < static_cast<int>(LocalOp::Count); ++op)
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
      const auto o = static_cast<LocalOp>(op);
      EXPECT_EQ(d.supports(o, t), cpu_kernels_support(o, t)) << parallel::local_op_name(o) << " " << dtype_name(t);
    }
}

TEST(ServedDevice, AWorkerSaysWhatItServesAndTheCoordinatorBelievesIt) {
  FakeWorker w(net::Version{}, bytes_of(gpu_like()));
  RemoteDevice d(w.address(), 8, {});
  ASSERT_TRUE(d.served().has_value());
  EXPECT_EQ(d.served()->name, "vk:0");
  EXPECT_EQ(d.name(), "tcp://" + w.address());  // errors still name the worker
  EXPECT_EQ(d.threads(), 1);                    // the worker's, not the spec's guess
  EXPECT_EQ(d.reach().kind, "vk");              // what choose_group sees of it
  const DeviceMemory m = d.memory();
  EXPECT_TRUE(m.known() && m.hard_limit);
  EXPECT_EQ(m.free_bytes, 768u << 20);
  EXPECT_TRUE(d.supports(LocalOp::MatMul, DType::Q8_0));
  EXPECT_FALSE(d.supports(LocalOp::MatMul, DType::Q4_K)) << "a CPU runs it; this worker's device does not";
  EXPECT_TRUE(cpu_kernels_support(LocalOp::MatMul, DType::Q4_K));
}

TEST(ServedDevice, AHostileDeviceInfoFailsTheConnectNamingTheWorker) {
  Bytes b = bytes_of(gpu_like());
  // Past the name (u32 + 4 bytes), threads (4) and memory (8 + 8 + 1): the op count.
  const uint32_t huge = 1u << 30;
  std::memcpy(&b[8 + 4 + 17], &huge, 4);
  FakeWorker w(net::Version{}, b);
  EXPECT_ERROR(RemoteDevice(w.address(), 1, {}),
               "tcp://" + w.address() + ": connect: device ops: count 1073741824 exceeds the limit 256");
}

// A real worker process: its CPU device, named as it names it, with the machine's memory (no hard limit).
TEST(ServedDevice, AWorkerProcessSaysItServesItsCpuDevice) {
  testing_support::Worker w({"--devices", "cpu:2"});
  RemoteDevice d(w.address(), 1, {});
  ASSERT_TRUE(d.served().has_value());
  EXPECT_EQ(d.served()->name, "cpu:0");
  EXPECT_EQ(d.threads(), 2);
  EXPECT_TRUE(d.memory().known());
  EXPECT_FALSE(d.memory().hard_limit);
  expect_cpu_kernels(d);
}

// weft worker --devices vk:0: the coordinator sees the GPU's weight types and memory, not a CPU's.
TEST(ServedDevice, AWorkerServingVk0SaysWhatTheGpuRuns) {
  std::unique_ptr<Device> local;
  try {
    local = std::move(create_devices(parse_devices("vk:0"))[0]);
  } catch (const Error& e) {
    GTEST_SKIP() << "no vk:0 here: " << e.what();
  }
  testing_support::Worker w({"--devices", "vk:0"});
  RemoteDevice d(w.address(), 1, {});
  ASSERT_TRUE(d.served().has_value());
  EXPECT_EQ(d.served()->name, local->name());
  EXPECT_EQ(d.reach().kind, "vk");
  EXPECT_EQ(d.memory().total_bytes, local->memory().total_bytes);
  EXPECT_EQ(d.memory().hard_limit, local->memory().hard_limit);
  int differs_from_cpu = 0;
  for (int op = 0; op < static_cast<int>(LocalOp::Count); ++op)
    for (uint32_t t = 0; t < kMaxTypeIds; ++t) {
      if (!dtype_traits(t)) continue;
      const auto o = static_cast<LocalOp>(op);
      const auto type = static_cast<DType>(t);
      EXPECT_EQ(d.supports(o, type), local->supports(o, type)) << parallel::local_op_name(o) << " " << t;
      differs_from_cpu += d.supports(o, type) != cpu_kernels_support(o, type);
    }
  EXPECT_GT(differs_from_cpu, 0) << "vk:0 claims exactly the CPU's weight types: nothing here tells them apart";
}

// A probe reads past the DeviceInfo to the worker's close, so the session opened next is admitted.
TEST(ServedDevice, AProbeStillEndsItsSessionBeforeTheNext) {
  testing_support::Worker w;
  for (int i = 0; i < 3; ++i) {
    probe_worker(w.address(), {});
    RemoteDevice d(w.address(), 1, {});
    EXPECT_TRUE(d.served().has_value());
  }
}

// weft worker --memory-limit: announced as a hard limit, and a load past it (a caller bypassing
// load_devices' check) is refused by the worker.
TEST(ServedDevice, AWorkerRefusesALoadPastItsMemoryLimit) {
  const auto& m = conformance::tiny_model("tiny", "q8_0", "llama");
  const auto plan = m.plan(parallel::SplitMode::None, {1});
  ASSERT_GT(plan.devices[0].weight_bytes, 1024u);
  testing_support::Worker w({"--memory-limit", "1K"});
  RemoteDevice d(w.address(), 1, {});
  EXPECT_EQ(d.memory().total_bytes, 1024u);
  EXPECT_EQ(d.memory().free_bytes, 1024u);
  EXPECT_TRUE(d.memory().hard_limit);
  const LoadOptions& lo = conformance::kLoad;
  const uint64_t need = parallel::device_bytes(plan.devices[0], kv_sizing(lo));
  EXPECT_ERROR(d.load(plan.devices[0], *m.file, lo),
               fmt::format("[worker] tcp://{}: load: the plan gives this worker {:.1f} MiB of weights and KV cache, "
                           "over its --memory-limit of 0.0 MiB",
                           w.address(), need / 1048576.0));
}

// The worker sizes a plan's KV cache as the coordinator does (device::kv_sizing): a sliding-window
// layer's rows per slot, every slot. A limit of exactly what the plan needs is enough.
TEST(ServedDevice, AWorkerSizesSlidingWindowCachesAsTheCoordinator) {
  const auto& m = conformance::tiny_model("tiny", "q8_0", "gemma3");  // window 3: 2 x (3 + 16) rows of 64
  const auto plan = m.plan(parallel::SplitMode::None, {1});
  const LoadOptions& lo = conformance::kLoad;
  ASSERT_GT(plan.devices[0].kv_window_values, 0u);
  const uint64_t need = parallel::device_bytes(plan.devices[0], kv_sizing(lo));
  testing_support::Worker w({"--memory-limit", std::to_string(need)});
  RemoteDevice d(w.address(), 1, {});
  ASSERT_EQ(d.memory().total_bytes, need);
  d.load(plan.devices[0], *m.file, lo);
}

}  // namespace
}  // namespace weft::device::remote
