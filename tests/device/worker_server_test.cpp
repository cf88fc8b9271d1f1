// WorkerServer in process: serve() returns after max_sessions admitted sessions and after stop(),
// even with idle connections still in their handshakes (bounded by handshake_timeout_ms).
#include "device/remote/worker_server.h"
#include "core/error.h"
#include "device/remote/remote_device.h"
#include "net/frame.h"
#include "net/handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace weft::device::remote {
namespace {

using Clock = std::chrono::steady_clock;

// Stops the server when a test ends, failed or not, so that the future serving it is ready.
struct StopAtEnd {
  WorkerServer& server;
  ~StopAtEnd() { server.stop(); }
};

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

// Beyond the bound a connection is answered at once, with the refusal a coordinator retries.
TEST(WorkerServer, HandshakesBeyondTheBoundAreAnsweredBusyAtOnce) {
  WorkerOptions o = options();
  o.max_handshakes = 2;
  o.handshake_timeout_ms = 2000;
  WorkerServer server(o);
  auto serving = std::async(std::launch::async, [&] { server.serve(); });
  StopAtEnd stop_at_end{server};
  const net::HostPort hp{"127.0.0.1", server.port()};
  net::Socket a = net::connect_tcp(hp, 2000), b = net::connect_tcp(hp, 2000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both in their handshakes
  net::Socket c = net::connect_tcp(hp, 2000);
  const auto t0 = Clock::now();
  const net::Frame f = net::recv_frame(c, 2000, 2000, net::Phase::Handshake);
  ASSERT_EQ(f.type, net::MsgType::Error);
  const Error e = net::read_error_payload(f.payload, c.peer());
  EXPECT_TRUE(net::is_busy(e)) << e.what();
  EXPECT_NE(std::string(e.what()).find("2 connections in their handshake"), std::string::npos) << e.what();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
  server.stop();
  serving.get();
}

// An idle connection from `source` (a loopback address of its own) that never says hello.
net::Socket idle_from(const std::string& source, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &a.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << source;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  return net::Socket(fd, "tcp://" + source);
}

// 80 idle connections from one host (more than the 64 handshake places) take only that host's
// share: a coordinator from another address gets in at once.
TEST(WorkerServer, IdleFloodFromOneHostLeavesRoomForOthers) {
  WorkerOptions o = options();
  o.handshake_timeout_ms = 20000;  // the flood stays for the whole test
  WorkerServer server(o);
  auto serving = std::async(std::launch::async, [&] { server.serve(1); });
  StopAtEnd stop_at_end{server};
  std::vector<net::Socket> flood;
  for (int i = 0; i < 80; ++i) flood.push_back(idle_from("127.0.0.2", server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted: in their handshakes or refused
  const auto t0 = Clock::now();
  { RemoteDevice d("127.0.0.1:" + std::to_string(server.port()), 1, {}); }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));  // not a retry until the flood's deadline
  flood.clear();                                          // their handshakes end: serve(1) returns
  ASSERT_EQ(serving.wait_for(std::chrono::seconds(3)), std::future_status::ready) << "serve(1) did not return";
  serving.get();
}

// The flood from the coordinator's own address: the coordinator is told "busy", tries again, and
// gets in once the idle connections' handshake deadline has passed, within its connect timeout.
TEST(WorkerServer, CoordinatorRetriesPastAnIdleFloodFromItsOwnHost) {
  WorkerOptions o = options();
  o.handshake_timeout_ms = 1000;
  WorkerServer server(o);
  auto serving = std::async(std::launch::async, [&] { server.serve(1); });
  StopAtEnd stop_at_end{server};
  std::vector<net::Socket> flood;
  for (int i = 0; i < 80; ++i) flood.push_back(net::connect_tcp({"127.0.0.1", server.port()}, 2000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  { RemoteDevice d("127.0.0.1:" + std::to_string(server.port()), 1, {}); }
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(kConnectTimeoutMs));
  ASSERT_EQ(serving.wait_for(std::chrono::seconds(3)), std::future_status::ready) << "serve(1) did not return";
  serving.get();
}

}  // namespace
}  // namespace weft::device::remote
