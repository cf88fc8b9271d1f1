// Gloo groups over loopback: small all-reduces on the sync (busy-poll or blocking) path and large
// ones on the async path give exact sums, with ranks that poll differently and more distinct sizes
// than the ring cache holds; and the latency of one 4096-float all-reduce between two processes,
// next to a raw TCP exchange of the same bytes (printed; bounded so a broken sync path fails).
#include "core/error.h"
#include "net/kv_store.h"
#include "net/socket.h"
#include "parallel/gloo_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <sys/wait.h>
#include <unistd.h>

namespace weft::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Integers below 2^24 add exactly in f32, so the expected sums are exact.
float value(int rank, size_t i) { return static_cast<float>(i % 97) + 1000.0f * rank; }

TEST(GlooGroup, SyncAndAsyncAllReducesGiveExactSums) {
  net::KvServer store("127.0.0.1");
  const std::string addr = "127.0.0.1:" + std::to_string(store.port());
  std::vector<size_t> sizes = {1, 7, 4096, 4096, kSyncAllReduceMaxBytes / 4, kSyncAllReduceMaxBytes / 4 + 1, 200000};
  for (size_t k = 0; k < 12; ++k) sizes.push_back(100 + k);  // more distinct sizes than cached rings
  sizes.push_back(4096);                                     // evicted and rebuilt
  auto rank_main = [&](int rank) {
    auto g = make_gloo_group(rank, 2, WireType::F32, {addr, "t", "127.0.0.1", 5000, /*busy_poll=*/rank == 0});
    std::vector<std::string> errors;
    for (size_t n : sizes) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = value(rank, i);
      g->all_reduce_sum(x.data(), n);
      for (size_t i = 0; i < n; ++i)
        if (x[i] != value(0, i) + value(1, i)) {
          errors.push_back(fmt::format("n={} i={}: {}", n, i, x[i]));
          break;
        }
      const float mine = static_cast<float>(rank + 1);  // the async mesh still works in between
      std::vector<float> both(2);
      g->all_gather(&mine, {1, 1}, both.data());
      if (both[0] != 1.0f || both[1] != 2.0f) errors.push_back("all_gather");
    }
    return errors;
  };
  auto r1 = std::async(std::launch::async, rank_main, 1);
  const auto e0 = rank_main(0);
  const auto e1 = r1.get();
  EXPECT_TRUE(e0.empty()) << e0[0];
  EXPECT_TRUE(e1.empty()) << e1[0];
}

constexpr size_t kLatencyFloats = 4096;
constexpr int kCalls = 2000;

// Microseconds per call of an all-reduce of kLatencyFloats between this process (rank 0) and a
// forked one (rank 1).
double all_reduce_us(bool busy, size_t sync_max_bytes) {
  net::KvServer store("127.0.0.1");
  const GlooOptions opt{"127.0.0.1:" + std::to_string(store.port()), "lat", "127.0.0.1", 5000, busy, sync_max_bytes};
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      auto g = make_gloo_group(1, 2, WireType::F32, opt);
      std::vector<float> x(kLatencyFloats, 1.0f);
      for (int i = 0; i < kCalls + 100; ++i) g->all_reduce_sum(x.data(), x.size());
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  auto g = make_gloo_group(0, 2, WireType::F32, opt);
  std::vector<float> x(kLatencyFloats, 1.0f);
  for (int i = 0; i < 100; ++i) g->all_reduce_sum(x.data(), x.size());  // warm-up, rings built
  const auto t0 = Clock::now();
  for (int i = 0; i < kCalls; ++i) g->all_reduce_sum(x.data(), x.size());
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kCalls;
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return us;
}

// Microseconds per round of a raw exchange of the same bytes: both sides send 16 KiB, then each
// reads the other's (what a two-rank ring all-reduce moves), over plain TCP_NODELAY sockets.
double raw_exchange_us() {
  net::Listener l({"127.0.0.1", 0});
  const size_t n = kLatencyFloats * sizeof(float);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      net::Socket s = net::connect_tcp({"127.0.0.1", l.port()}, 5000);
      std::vector<uint8_t> in(n), out(n, 1);
      for (int i = 0; i < kCalls + 100; ++i) {
        s.send_all(out.data(), n, 5000);
        s.recv_exact(in.data(), n, 5000);
      }
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  net::Socket s = l.accept(5000);
  std::vector<uint8_t> in(n), out(n, 2);
  auto round = [&] {
    s.send_all(out.data(), n, 5000);
    s.recv_exact(in.data(), n, 5000);
  };
  for (int i = 0; i < 100; ++i) round();
  const auto t0 = Clock::now();
  for (int i = 0; i < kCalls; ++i) round();
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kCalls;
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return us;
}

TEST(GlooGroup, AllReduceLatencyAgainstRawTcp) {
  const double raw = raw_exchange_us();
  const double busy = all_reduce_us(true, kSyncAllReduceMaxBytes);
  const double block = all_reduce_us(false, kSyncAllReduceMaxBytes);
  const double async = all_reduce_us(false, 0);
  std::printf("all-reduce of %zu floats, 2 processes on loopback: raw TCP exchange %.1f us | gloo sync busy-poll %.1f us | "
              "sync blocking %.1f us | async (gloo::allreduce) %.1f us\n",
              kLatencyFloats, raw, busy, block, async);
  RecordProperty("raw_tcp_us", static_cast<int>(raw));
  RecordProperty("busy_poll_us", static_cast<int>(busy));
  RecordProperty("blocking_us", static_cast<int>(block));
  RecordProperty("async_us", static_cast<int>(async));
  // Loose bounds (shared CI cores): a sync path that fell back to timeouts would take seconds.
  constexpr double kMaxFactor = 50, kSlackUs = 2000;
  EXPECT_LT(busy, kMaxFactor * raw + kSlackUs);
  EXPECT_LT(block, kMaxFactor * raw + kSlackUs);
}

}  // namespace
}  // namespace weft::parallel
