// Remote workers end to end on loopback: `weft worker` processes serving a coordinator (`weft run`)
// give the same greedy tokens as one local device; hostile or broken sessions (wrong key, wrong
// protocol, garbage, truncated or oversized frames) end only that session; a worker killed
// mid-generation makes the coordinator fail fast, naming the worker.
#include "core/error.h"
#include "device/remote/remote_device.h"
#include "net/channel.h"
#include "net/frame.h"
#include "net/handshake.h"
#include "net/wire.h"
#include "support/expect_error.h"
#include "tools/gen_model.h"
#include "worker_process.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

namespace weft::device::remote {
namespace {

constexpr auto kKillDeadline = std::chrono::seconds(5);  // the task's bound for naming a dead worker

using testing_support::greedy_text;
using testing_support::shell;
using testing_support::stories;
using testing_support::Worker;

// Greedy generated ids from `weft run --json`, as the text of the JSON array.
std::string greedy_ids(const std::string& model, const std::string& devices, const std::string& extra = "") {
  const std::string out = shell(std::string(WEFT_BINARY) + " run --json --temp 0 -n 24 -p 'Once upon a time' -m " +
                                model + " --devices " + devices + " --net-poll block " + extra + " 2>&1");
  const size_t a = out.find("\"generated_ids\":[");
  if (a == std::string::npos) return "ERROR: " + out;
  return out.substr(a, out.find(']', a) - a);
}

TEST(RemoteWorker, StoriesGreedyTokensMatchOneLocalDevice) {
  Worker w1, w2;
  const std::string ref = greedy_ids(stories(), "cpu:1");
  ASSERT_EQ(ref.find("ERROR"), std::string::npos) << ref;
  ASSERT_GT(ref.size(), 40u);  // 24 ids were generated
  EXPECT_EQ(greedy_ids(stories(), w1.url() + "," + w2.url(), "-ts 3,1"), ref);
  EXPECT_EQ(greedy_ids(stories(), "cpu:1," + w1.url() + "," + w2.url(), "-ts 1,2,1"), ref);
  EXPECT_EQ(greedy_ids(stories(), w1.url() + ",cpu:1", "-sm layer"), ref);
  // The workers share this host, so their all-reduces take shared memory; the same over TCP:
  EXPECT_EQ(greedy_ids(stories(), w1.url() + "," + w2.url(), "-ts 3,1 --net-shm off"), ref);
  EXPECT_EQ(greedy_ids(stories(), "cpu:1," + w1.url() + "," + w2.url(), "-ts 1,2,1 --net-shm off"), ref);
  Worker w3;  // three worker processes, and three plus a local device, uneven
  EXPECT_EQ(greedy_ids(stories(), w1.url() + "," + w2.url() + "," + w3.url(), "-ts 1,1,2"), ref);
  EXPECT_EQ(greedy_ids(stories(), w1.url() + ",cpu:1," + w2.url() + "," + w3.url(), "-ts 2,1,1,3"), ref);
}

// Workers on one host tell which transport their group chose, and take the one asked for.
TEST(RemoteWorker, WorkersOnOneHostAllReduceThroughSharedMemoryUnlessTold) {
  const std::string log = testing::TempDir() + "/weft_shm_worker_" + std::to_string(::getpid()) + ".log";
  Worker w1({}, "127.0.0.1", {}, log), w2;
  auto logged = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string pair = w1.url() + "," + w2.url();
  ASSERT_EQ(greedy_ids(stories(), pair).find("ERROR"), std::string::npos);
  EXPECT_NE(logged().find("rank 0 of 2, all-reduces over host shared memory"), std::string::npos) << logged();
  ASSERT_EQ(greedy_ids(stories(), pair, "--net-shm off").find("ERROR"), std::string::npos);
  EXPECT_NE(logged().find("rank 0 of 2, all-reduces over tcp"), std::string::npos) << logged();
}

// Scheduling policy of every thread of process pid: SCHED_BATCH, SCHED_OTHER, or -1 when they differ.
int threads_policy(pid_t pid) {
  int policy = -2;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    const int p = ::sched_getscheduler(std::stoi(task.path().filename().string()));
    if (p < 0) continue;  // a thread that ended while we looked
    policy = policy == -2 || policy == p ? p : -1;
  }
  return policy;
}

// Workers run their threads as SCHED_BATCH (see core/sched_policy.h), or as told.
TEST(RemoteWorker, WorkerThreadsTakeTheBatchPolicyUnlessTold) {
  Worker batch, normal({"--sched", "normal"});
  EXPECT_EQ(threads_policy(batch.pid()), SCHED_BATCH);
  EXPECT_EQ(threads_policy(normal.pid()), SCHED_OTHER);
  ASSERT_EQ(greedy_ids(stories(), batch.url() + "," + normal.url()).find("ERROR"), std::string::npos);
  EXPECT_EQ(threads_policy(batch.pid()), SCHED_BATCH);  // also the threads its sessions started
  const std::string bad = shell(std::string(WEFT_BINARY) + " worker --sched fifo 2>&1; echo rc=$?");
  EXPECT_NE(bad.find("--sched: fifo not in {batch,normal}"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("rc=0"), std::string::npos) << bad;
}

TEST(RemoteWorker, GeneratedModelGreedyTokensMatchOneLocalDevice) {
  tools::GenModelOptions o;
  o.type = "q4_0";
  o.seed = 7;
  const auto bytes = tools::generate_model_bytes(o);
  const std::string path = testing::TempDir() + "/weft_remote_tiny.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  Worker w1, w2;
  const std::string ref = greedy_text(path, "cpu:1");
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  ASSERT_GT(ref.size(), 30u);
  EXPECT_EQ(greedy_text(path, w1.url() + "," + w2.url(), "-ts 1,2"), ref);
  EXPECT_EQ(greedy_text(path, w1.url() + ",cpu:1," + w2.url(), "-ts 2,1,1"), ref);
  Worker w3;
  EXPECT_EQ(greedy_text(path, w1.url() + "," + w2.url() + "," + w3.url(), "-ts 3,1,2"), ref);
}

// The worker still completes a handshake after whatever the previous session did.
void expect_serving(const Worker& w) { EXPECT_NO_THROW(RemoteDevice(w.address(), 1, {})) << "worker stopped serving"; }

TEST(RemoteWorker, BrokenSessionsEndOnlyThemselves) {
  Worker w;
  const net::HostPort hp = net::parse_host_port(w.address());
  {  // garbage: an HTTP request
    net::Socket s = net::connect_tcp(hp, 2000);
    const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    s.send_all(junk.data(), junk.size(), 1000);
    // The worker answers with an error frame naming what it refused, then closes.
    EXPECT_ERROR(net::expect_frame(s, net::MsgType::Challenge, 3000), "bad frame magic");
  }
  expect_serving(w);
  {  // oversized: a Hello claiming 1 GiB
    net::Socket s = net::connect_tcp(hp, 2000);
    net::ByteWriter h;
    h.u32(net::kFrameMagic << 16 | static_cast<uint32_t>(net::MsgType::Hello));
    h.u32(1u << 30);
    s.send_all(h.data().data(), h.data().size(), 1000);
    EXPECT_ERROR(net::expect_frame(s, net::MsgType::Challenge, 3000), "hello frame of 1073741824 bytes refused");
  }
  expect_serving(w);
  {  // truncated: the header promises more than arrives before the close
    net::Socket s = net::connect_tcp(hp, 2000);
    net::ByteWriter h;
    h.u32(net::kFrameMagic << 16 | static_cast<uint32_t>(net::MsgType::Hello));
    h.u32(44);
    h.u32(net::kHelloMagic);
    s.send_all(h.data().data(), h.data().size(), 1000);
  }
  expect_serving(w);
  {  // a different protocol major
    net::Socket s = net::connect_tcp(hp, 2000);
    try {
      net::client_handshake(s, {}, net::Version{static_cast<uint16_t>(net::kProtocolMajor + 1), 0});
      FAIL() << "accepted protocol major " << net::kProtocolMajor + 1;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos) << e.what();
    }
  }
  expect_serving(w);
  {  // a message out of order after a good handshake: a step before load
    net::Socket s = net::connect_tcp(hp, 2000);
    net::client_handshake(s, {});
    net::expect_frame(s, net::MsgType::DeviceInfo, 3000);  // a session's first frame (protocol 9.2)
    net::ByteWriter b;
    b.u32(0);
    net::send_frame(s, net::MsgType::Step, b.data(), 1000);
    EXPECT_ERROR(net::expect_frame(s, net::MsgType::StepResult, 3000), "step before load");
  }
  expect_serving(w);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A wrong protocol major is answered with exactly one Error frame, then the close.
TEST(RemoteWorker, WrongProtocolMajorGetsExactlyOneErrorFrame) {
  Worker w;
  net::Socket s = net::connect_tcp(net::parse_host_port(w.address()), 2000);
  net::ByteWriter hello;
  hello.u32(net::kHelloMagic);
  hello.u32(net::kProtocolMajor + 1);
  hello.u32(0);
  hello.bytes(std::vector<uint8_t>(net::kNonceBytes, 1));
  net::send_frame(s, net::MsgType::Hello, hello.data(), 1000);
  net::Frame f = net::recv_frame(s, 3000, 3000);
  EXPECT_EQ(f.type, net::MsgType::Error);
  const std::string next = error_of([&] { net::recv_frame(s, 3000, 3000); });
  EXPECT_NE(next.find("closed by peer"), std::string::npos) << "a second frame or no close: " << next;
}

// Idle connections that never say hello neither hold the session slot nor delay the coordinator.
TEST(RemoteWorker, IdleConnectionsDoNotLockOutTheCoordinator) {
  Worker w;
  const net::HostPort hp = net::parse_host_port(w.address());
  net::Socket idle1 = net::connect_tcp(hp, 2000), idle2 = net::connect_tcp(hp, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both accepted and waiting in their handshakes
  const auto t0 = std::chrono::steady_clock::now();
  net::Socket s = net::connect_tcp(hp, 2000);
  net::SessionMac mac = net::client_handshake(s, {});
  net::Channel ch(std::move(s), std::move(mac));
  ch.expect(net::MsgType::DeviceInfo, 3000, 3000);  // a session's first frame (protocol 9.2)
  net::ByteWriter b;
  b.i32(0);
  ch.send(net::MsgType::Step, b.data(), 1000);  // served: answered (an error, before any load)
  const std::string e = error_of([&] { ch.expect(net::MsgType::StepResult, 3000, 3000); });
  EXPECT_NE(e.find("step before load"), std::string::npos) << e;
  EXPECT_LT(seconds_since(t0), 1.0);
}

// While a session is active a second coordinator is told the worker is busy, and by whom.
TEST(RemoteWorker, SecondCoordinatorIsToldTheWorkerIsBusy) {
  Worker w;
  auto first = std::make_unique<RemoteDevice>(w.address(), 1, std::vector<uint8_t>{});
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { RemoteDevice second(w.address(), 1, {}); });
  EXPECT_NE(e.find(w.url() + ": connect: worker busy: serving a session from tcp://127.0.0.1:"), std::string::npos)
      << e;
  EXPECT_LT(seconds_since(t0), 1.0);
  first.reset();  // its Bye frees the slot
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  expect_serving(w);
}

// A session that never loads is dropped after --preload-timeout, freeing the worker.
TEST(RemoteWorker, SessionThatDoesNotLoadIsDropped) {
  Worker w({"--preload-timeout", "1"});
  RemoteDevice idle(w.address(), 1, {});
  EXPECT_ERROR(RemoteDevice(w.address(), 1, {}), "worker busy");  // busy
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  expect_serving(w);
}

// Before authentication a frame header announcing a large step is refused from its 8 bytes.
TEST(RemoteWorker, LargeFrameBeforeAuthenticationIsRefusedFromItsHeader) {
  const std::string key_file = testing::TempDir() + "/weft_preauth_key";
  testing_support::write_key_file(key_file, "correct horse battery staple\n");
  Worker w({"--auth-key-file", key_file});
  net::Socket s = net::connect_tcp(net::parse_host_port(w.address()), 2000);
  net::ByteWriter h;
  h.u32(net::kFrameMagic << 16 | static_cast<uint32_t>(net::MsgType::Step));
  h.u32(200u << 20);
  s.send_all(h.data().data(), h.data().size(), 1000);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { net::expect_frame(s, net::MsgType::Challenge, 3000); });
  EXPECT_NE(e.find("step frame of 209715200 bytes refused before authentication"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { net::recv_frame(s, 3000, 3000); }).find("closed by peer"), std::string::npos);
  EXPECT_LT(seconds_since(t0), 1.0);
}

// After an authenticated handshake a frame with a bad MAC (forged or altered in flight) ends the session.
TEST(RemoteWorker, FrameWithABadMacEndsTheSession) {
  const std::string key_file = testing::TempDir() + "/weft_mac_key";
  testing_support::write_key_file(key_file, "correct horse battery staple\n");
  const auto key = net::read_key_file(key_file);
  Worker w({"--auth-key-file", key_file});
  net::Socket s = net::connect_tcp(net::parse_host_port(w.address()), 2000);
  net::SessionMac mac = net::client_handshake(s, key);
  net::ByteWriter f;  // a Bye with an all-zero tag
  f.u32(net::kFrameMagic << 16 | static_cast<uint32_t>(net::MsgType::Bye));
  f.u32(0);
  f.bytes(std::vector<uint8_t>(net::kMacTagBytes, 0));
  s.send_all(f.data().data(), f.data().size(), 1000);
  net::Channel ch(std::move(s), std::move(mac));
  ch.expect(net::MsgType::DeviceInfo, 3000, 3000);  // sent before the worker reads the forged Bye
  const std::string e = error_of([&] { ch.expect(net::MsgType::StepResult, 3000, 3000); });
  EXPECT_NE(e.find("bye frame #0 failed authentication"), std::string::npos) << e;
}

TEST(RemoteWorker, WrongKeyIsRejectedNamingTheWorker) {
  const std::string key_file = testing::TempDir() + "/weft_worker_key";
  testing_support::write_key_file(key_file, "correct horse battery staple\n");
  Worker w({"--auth-key-file", key_file});
  try {
    RemoteDevice d(w.address(), 1, std::vector<uint8_t>(20, 'x'));
    FAIL() << "wrong key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(w.url()), std::string::npos) << e.what();
  }
  EXPECT_ERROR(RemoteDevice(w.address(), 1, {}), "requires an auth key");  // no key at all
  EXPECT_NO_THROW(RemoteDevice(w.address(), 1, net::read_key_file(key_file)));
}

// With --on-device-loss fail (replan: tests/runtime/device_loss_test.cpp).
TEST(RemoteWorker, KilledWorkerFailsTheCoordinatorQuicklyNamingIt) {
  Worker w1, w2;
  const std::string err = testing::TempDir() + "/weft_kill_stderr";
  const pid_t pid = testing_support::start_long_run(w1.url() + "," + w2.url(), err, {"--on-device-loss", "fail"});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // loaded and generating
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "coordinator ended before the kill";
  const auto t0 = std::chrono::steady_clock::now();
  w1.kill(SIGKILL);
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - t0 < kKillDeadline + std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto took = std::chrono::steady_clock::now() - t0;
  if (done == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "coordinator still running after the worker died";
  }
  EXPECT_LT(took, kKillDeadline);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(w1.url()), std::string::npos) << text;
}

}  // namespace
}  // namespace weft::device::remote
