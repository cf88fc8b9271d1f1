// weft worker --devices: a worker serves one local device of any registered kind.
#include "device/remote/worker_server.h"
#include "support/expect_error.h"
#include "tiny_model.h"
#include "worker_process.h"

#include <gtest/gtest.h>

namespace weft::device::remote {
namespace {

TEST(WorkerDevices, ServeDeviceTakesOneEntryOfALocalKind) {
  WorkerOptions o;
  o.threads = 2;
  EXPECT_EQ(describe(served_device(o)), "cpu:2");  // the default: -t threads
  serve_device(o, "cpu:3");
  EXPECT_EQ(describe(served_device(o)), "cpu:3");
  ASSERT_TRUE(o.device.has_value());
  EXPECT_EQ(o.device->kind, DeviceSpec::Kind::Cpu);
  EXPECT_EQ(o.threads, 3);  // what it announces and waits in all-reduces with
  EXPECT_ERROR(serve_device(o, "cpu:1,cpu:1"), "a worker serves one device, got 2");
  EXPECT_ERROR(serve_device(o, "tcp://10.0.0.2:7070"), "a worker serves a device of this machine");
  EXPECT_ERROR(serve_device(o, "gpu:0"), "unknown device 'gpu:0'");
}

TEST(WorkerDevices, AWorkerServingCpu2GivesTheLocalLogits) {
  testing_support::Tiny m("worker_devices");
  testing_support::Worker w({"--devices", "cpu:2"});
  m.load_on(w.address());  // checks the logits against a local CPU device
}

}  // namespace
}  // namespace weft::device::remote
