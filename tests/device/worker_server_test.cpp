// WorkerServer in process: serve() returns after max_sessions admitted sessions and after stop(),
// even with idle connections still in their handshakes (bounded by handshake_timeout_ms).
#include "device/remote/worker_server.h"
#include "core/error.h"
#include "device/remote/remote_device.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace weft::device::remote {
namespace {

using Clock = std::chrono::steady_clock;

WorkerOptions options() {
  WorkerOptions o;
  o.listen = {"127.0.0.1", 0};
  o.handshake_timeout_ms = 500;
  return o;
}

TEST(WorkerServer, ServeReturnsAfterMaxSessionsDespiteIdleConnections) {
  WorkerServer server(options());
  auto serving = std::async(std::launch::async, [&] { server.serve(1); });
  const std::string addr = "127.0.0.1:" + std::to_string(server.port());
  net::Socket idle = net::connect_tcp(net::parse_host_port(addr), 2000);  // never says hello
  { RemoteDevice d(addr, 1, {}); }                                        // the one session: handshake, then Bye
  ASSERT_EQ(serving.wait_for(std::chrono::seconds(3)), std::future_status::ready) << "serve(1) did not return";
  serving.get();
}

TEST(WorkerServer, StopEndsServing) {
  WorkerServer server(options());
  auto serving = std::async(std::launch::async, [&] { server.serve(); });
  net::Socket idle = net::connect_tcp({"127.0.0.1", server.port()}, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted, in its handshake
  const auto t0 = Clock::now();
  server.stop();
  ASSERT_EQ(serving.wait_for(std::chrono::seconds(3)), std::future_status::ready) << "serve() ignored stop()";
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(WorkerServer, HandshakesBeyondTheBoundAreClosedAtOnce) {
  WorkerOptions o = options();
  o.max_handshakes = 2;
  o.handshake_timeout_ms = 2000;
  WorkerServer server(o);
  auto serving = std::async(std::launch::async, [&] { server.serve(); });
  const net::HostPort hp{"127.0.0.1", server.port()};
  net::Socket a = net::connect_tcp(hp, 2000), b = net::connect_tcp(hp, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both in their handshakes
  net::Socket c = net::connect_tcp(hp, 2000);
  uint8_t byte;
  const auto t0 = Clock::now();
  try {
    c.recv_exact(&byte, 1, 2000);
    FAIL() << "the third connection got a byte";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closed by peer"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  server.stop();
  serving.get();
}

}  // namespace
}  // namespace weft::device::remote
