// Gloo groups over loopback: small all-reduces on the sync (busy-poll or blocking) path and large
// ones on the async path give exact sums, with ranks that poll differently and more distinct sizes
// than the ring cache holds; abort() releases a rank waiting for a peer. Each also through the
// same-host shared memory that ranks on one host (these threads) choose, and the choice is made
// alike by every rank. The latency of the paths is a benchmark (bench/collectives_bench.cpp).
#include "parallel/gloo_group.h"
#include "core/error.h"
#include "net/kv_store.h"
#include "parallel/host_shm.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <thread>

namespace weft::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Integers below 2^24 add exactly in f32, so the expected sums are exact.
float gloo_value(int rank, size_t i) { return static_cast<float>(i % 97) + 1000.0f * rank; }

// Every size class of the sync path (one message; several ring segments of several messages,
// segments of unequal length) and Gloo's asynchronous algorithm (chunk 0), with 2 and 3 ranks:
// exact sums, the same on every rank, and the async mesh usable in between (all-gathers, and
// broadcasts whose root keeps its own buffer).
const char* transport_name(bool shm) { return shm ? "host shared memory" : "tcp"; }

TEST(GlooGroup, AllReducesGiveExactSumsOnEveryPath) {
  net::KvServer store("127.0.0.1");
  const std::string addr = "127.0.0.1:" + std::to_string(store.port());
  const std::vector<size_t> sizes = {
      1, 7, 63, 64, 65, 191, 4096, kSyncChunkBytes / 4, kSyncChunkBytes / 4 + 1, 200000, kHostShmChunkFloats * 2 + 3};
  for (bool shm : {false, true})
    for (int n_ranks : {2, 3})
      for (size_t chunk : {kSyncChunkBytes, size_t{256}, size_t{0}}) {
        if (shm && chunk != kSyncChunkBytes) continue;  // the TCP chunking does not apply
        const std::string prefix = fmt::format("t{}-{}-{}", shm, n_ranks, chunk);
        auto rank_main = [&](int rank) {
          GlooOptions opt{addr, prefix, "127.0.0.1", 5000, /*busy_poll=*/rank == 0};
          opt.sync_chunk_bytes = chunk;
          opt.host_shm = shm;
          auto g = make_gloo_group(rank, n_ranks, WireType::F32, opt);
          std::vector<std::string> errors;
          if (g->transport() != transport_name(shm)) errors.push_back(std::string(g->transport()));
          for (size_t n : sizes) {
            std::vector<float> x(n);
            for (size_t i = 0; i < n; ++i) x[i] = gloo_value(rank, i);
            g->all_reduce_sum(x.data(), n);
            for (size_t i = 0; i < n; ++i) {
              float want = 0;
              for (int q = 0; q < n_ranks; ++q) want += gloo_value(q, i);
              if (x[i] != want) {
                errors.push_back(fmt::format("{} ranks, chunk {}, n={} i={}: {}", n_ranks, chunk, n, i, x[i]));
                break;
              }
            }
            // Integers (--exact's fixed point) near 2^62: their sum wraps back to the right result.
            std::vector<int64_t> ints(n);
            auto int_value = [](int r, size_t i) {
              return static_cast<int64_t>((static_cast<uint64_t>(r) + 1) * 0x3fffffffffffff01u + i);
            };
            for (size_t i = 0; i < n; ++i) ints[i] = int_value(rank, i);
            g->all_reduce_sum_exact(ints.data(), n);
            for (size_t i = 0; i < n; ++i) {
              uint64_t want = 0;
              for (int q = 0; q < n_ranks; ++q) want += static_cast<uint64_t>(int_value(q, i));
              if (ints[i] != static_cast<int64_t>(want)) {
                errors.push_back(fmt::format("exact, {} ranks, n={} i={}: {}", n_ranks, n, i, ints[i]));
                break;
              }
            }
            const float mine = static_cast<float>(rank + 1);  // the async mesh still works in between
            std::vector<float> all(n_ranks);
            g->all_gather(&mine, std::vector<size_t>(n_ranks, 1), all.data());
            if (all[0] != 1.0f || all[1] != 2.0f) errors.push_back("all_gather");
            const int root = static_cast<int>(n % n_ranks);  // and a broadcast from each rank in turn
            for (size_t i = 0; i < n; ++i) x[i] = gloo_value(rank, i);
            g->broadcast(x.data(), n, root);
            for (size_t i = 0; i < n; ++i)
              if (x[i] != gloo_value(root, i)) {
                errors.push_back(fmt::format("broadcast from {}, n={} i={}: {}", root, n, i, x[i]));
                break;
              }
          }
          return errors;
        };
        std::vector<std::future<std::vector<std::string>>> peers;
        for (int r = 1; r < n_ranks; ++r) peers.push_back(std::async(std::launch::async, rank_main, r));
        const auto e0 = rank_main(0);
        EXPECT_TRUE(e0.empty()) << e0[0];
        for (auto& p : peers) {
          const auto e = p.get();
          EXPECT_TRUE(e.empty()) << e[0];
        }
      }
}

// bf16 / f16 wires: each value within the rounding of a few partial sums, in one message and over
// the ring, with 3 ranks (a ring of several hops); every rank ends with the same bits.
TEST(GlooGroup, HalfPrecisionWiresSumWithinRounding) {
  net::KvServer store("127.0.0.1");
  const std::string addr = "127.0.0.1:" + std::to_string(store.port());
  for (bool shm : {false, true})
    for (WireType wire : {WireType::BF16, WireType::F16}) {
      const double tol = wire == WireType::BF16 ? 3 * 0x1p-8 : 3 * 0x1p-11;  // relative, ~3 roundings
      const std::string prefix = fmt::format("w{}{}", shm, wire_type_name(wire));
      auto x_of = [](int rank, size_t i) { return std::sin(0.37f * static_cast<float>(i) + rank) * (1 + rank); };
      auto rank_main = [&](int rank) {
        GlooOptions opt{addr, prefix, "127.0.0.1", 5000};
        opt.host_shm = shm;
        auto g = make_gloo_group(rank, 3, wire, opt);
        EXPECT_EQ(g->transport(), transport_name(shm));
        std::vector<std::vector<float>> out;
        for (size_t n : {size_t{4096}, kSyncChunkBytes / 2 + 5}) {
          std::vector<float> x(n);
          for (size_t i = 0; i < n; ++i) x[i] = x_of(rank, i);
          g->all_reduce_sum(x.data(), n);
          out.push_back(std::move(x));
        }
        EXPECT_EQ(g->stats().bytes_all_reduce, (4096 + kSyncChunkBytes / 2 + 5) * 2);
        return out;
      };
      auto r1 = std::async(std::launch::async, rank_main, 1);
      auto r2 = std::async(std::launch::async, rank_main, 2);
      const auto a = rank_main(0), b = r1.get(), c = r2.get();
      for (size_t k = 0; k < a.size(); ++k) {
        double worst = 0;
        for (size_t i = 0; i < a[k].size(); ++i) {
          const double want = double(x_of(0, i)) + x_of(1, i) + x_of(2, i);
          for (const auto* got : {&a[k], &b[k], &c[k]})  // relative to the largest magnitude, 6
            worst = std::max(worst, std::abs((*got)[i] - want) / 6.0);
        }
        EXPECT_LT(worst, tol) << wire_type_name(wire) << " n=" << a[k].size();
        EXPECT_GT(worst, 0.0) << "no rounding at all: the wire was not " << wire_type_name(wire);
        EXPECT_EQ(0, std::memcmp(a[k].data(), b[k].data(), a[k].size() * 4)) << "ranks 0 and 1 differ";
        EXPECT_EQ(0, std::memcmp(a[k].data(), c[k].data(), a[k].size() * 4)) << "ranks 0 and 2 differ";
      }
    }
}

// A rank blocked in a collective for a peer that never comes is released by abort() (as the
// engine does when it finds that peer dead), long before the group's timeout.
void expect_abort_releases(size_t n, bool shm) {
  net::KvServer store("127.0.0.1");
  const std::string addr = "127.0.0.1:" + std::to_string(store.port());
  constexpr int kTimeoutMs = 30000;
  GlooOptions opt{addr, "a", "127.0.0.1", kTimeoutMs};
  opt.host_shm = shm;
  auto peer = std::async(std::launch::async, [&] { return make_gloo_group(1, 2, WireType::F32, opt); });
  auto g = make_gloo_group(0, 2, WireType::F32, opt);
  ASSERT_EQ(g->transport(), transport_name(shm));
  auto idle = peer.get();  // connected, but never joins the all-reduce
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    g->abort();
  });
  std::vector<float> x(n, 1.0f);
  const auto t0 = Clock::now();
  EXPECT_ERROR(g->all_reduce_sum(x.data(), n),
               shm ? "a peer device failed during a collective" : "failed (a peer died or timed out)")
      << n;
  aborter.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(kTimeoutMs / 3))
      << n << " floats: abort did not release the rank";
}

TEST(GlooGroup, AbortReleasesARankBlockedInACollective) {
  for (bool shm : {false, true}) {
    expect_abort_releases(1024, shm);    // one message
    expect_abort_releases(100000, shm);  // the ring, several messages per segment
  }
}

// Shared memory only when every rank asks for it: one rank saying no keeps all of them on TCP
// (and they still sum).
TEST(GlooGroup, EveryRankChoosesTheSameTransport) {
  net::KvServer store("127.0.0.1");
  const std::string addr = "127.0.0.1:" + std::to_string(store.port());
  for (int refuser : {-1, 0, 2}) {
    auto rank_main = [&](int rank) {
      GlooOptions opt{addr, fmt::format("c{}", refuser), "127.0.0.1", 5000};
      opt.host_shm = rank != refuser;
      auto g = make_gloo_group(rank, 3, WireType::F32, opt);
      float x = static_cast<float>(rank + 1);
      g->all_reduce_sum(&x, 1);
      EXPECT_EQ(x, 6.0f);
      return std::string(g->transport());
    };
    auto r1 = std::async(std::launch::async, rank_main, 1);
    auto r2 = std::async(std::launch::async, rank_main, 2);
    const std::string t0 = rank_main(0);
    EXPECT_EQ(t0, transport_name(refuser < 0)) << "refuser " << refuser;
    EXPECT_EQ(r1.get(), t0);
    EXPECT_EQ(r2.get(), t0);
  }
}

}  // namespace
}  // namespace weft::parallel
