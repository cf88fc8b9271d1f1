// Shared-memory collectives: exact sums on integer-valued floats (any summation order gives the
// same bits), every group size 1..8, awkward lengths, and many back-to-back calls on reused
// buffers, which is where a missing or reused-too-early barrier shows up.
#include "core/error.h"
#include "core/fp16.h"
#include "parallel/group.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <random>
#include <thread>

namespace weft::parallel {
namespace {

constexpr size_t kSizes[] = {0, 1, 7, 4096, 10001};
constexpr int kMaxRanks = 8;

// Runs fn on every rank, one thread each, and rethrows the first exception.
void run_ranks(std::vector<std::unique_ptr<Group>>& g, const std::function<void(Group&)>& fn) {
  std::vector<std::exception_ptr> errs(g.size());
  std::vector<std::thread> ts;
  for (size_t r = 0; r < g.size(); ++r)
    ts.emplace_back([&, r] {
      try {
        fn(*g[r]);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

// Integer-valued input in [-1000, 1000], different for every (rank, index, iteration).
float shm_value(int rank, size_t i, int iter) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u +
                     static_cast<uint32_t>(iter) * 977u;
  return static_cast<float>(static_cast<int>((h >> 7) % 2001u) - 1000);
}

float expected_sum(int n_ranks, size_t i, int iter) {
  float s = 0;
  for (int r = 0; r < n_ranks; ++r) s += shm_value(r, i, iter);
  return s;
}

TEST(ShmGroup, InputsVary) {
  // Guards the generator: a constant input would make every sum test vacuous.
  EXPECT_NE(shm_value(0, 0, 0), shm_value(1, 0, 0));
  EXPECT_NE(shm_value(0, 0, 0), shm_value(0, 1, 0));
  EXPECT_NE(shm_value(0, 0, 0), shm_value(0, 0, 1));
}

TEST(ShmGroup, AllReduceEverySizeAndGroup) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (bool spin : {true, false}) {
      auto g = make_shm_group(n, WireType::F32, spin);
      run_ranks(g, [&](Group& grp) {
        EXPECT_EQ(grp.size(), n);
        for (size_t len : kSizes) {
          std::vector<float> buf(len);
          for (size_t i = 0; i < len; ++i) buf[i] = shm_value(grp.rank(), i, 0);
          grp.all_reduce_sum(buf.data(), len);
          size_t bad = 0;
          for (size_t i = 0; i < len; ++i) bad += buf[i] != expected_sum(n, i, 0);
          EXPECT_EQ(bad, 0u) << "n=" << n << " len=" << len << " rank=" << grp.rank();
        }
      });
    }
  }
}

// Integers that overflow on the way (rank terms near 2^62) sum, wrapping, to the right result.
int64_t exact_value(int rank, size_t i) {
  return static_cast<int64_t>((static_cast<uint64_t>(rank) + 1) * 0x3fffffffffffff01u + i * 2654435761u);
}

TEST(ShmGroup, ExactAllReduceEverySizeAndGroup) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    auto g = make_shm_group(n, WireType::F32, /*spin=*/n <= 2);
    run_ranks(g, [&](Group& grp) {
      for (size_t len : kSizes) {
        std::vector<int64_t> buf(len);
        for (size_t i = 0; i < len; ++i) buf[i] = exact_value(grp.rank(), i);
        grp.all_reduce_sum_exact(buf.data(), len);
        size_t bad = 0;
        for (size_t i = 0; i < len; ++i) {
          uint64_t want = 0;
          for (int r = 0; r < n; ++r) want += static_cast<uint64_t>(exact_value(r, i));
          bad += buf[i] != static_cast<int64_t>(want);
        }
        EXPECT_EQ(bad, 0u) << "n=" << n << " len=" << len << " rank=" << grp.rank();
      }
    });
  }
}

TEST(ShmGroup, AllReduceRepeatedOnReusedBuffers) {
  constexpr int kIters = 1000;
  for (int n : {2, 3, 8}) {
    auto g = make_shm_group(n, WireType::F32, /*spin=*/n <= 2);
    run_ranks(g, [&](Group& grp) {
      std::vector<float> buf(300);
      size_t bad = 0;
      for (int it = 0; it < kIters; ++it) {
        const size_t len = 1 + static_cast<size_t>(it * 37) % buf.size();  // lengths change too
        for (size_t i = 0; i < len; ++i) buf[i] = shm_value(grp.rank(), i, it);
        grp.all_reduce_sum(buf.data(), len);
        for (size_t i = 0; i < len; ++i) bad += buf[i] != expected_sum(n, i, it);
      }
      EXPECT_EQ(bad, 0u) << "n=" << n << " rank=" << grp.rank();
      EXPECT_EQ(grp.stats().n_all_reduce, static_cast<uint64_t>(kIters));
    });
  }
}

TEST(ShmGroup, BarrierSeparatesRounds) {
  constexpr int kIters = 1000;
  // Spinning only where the threads can have a core each (this runs on 2 shared cores).
  const std::pair<int, bool> cases[] = {{1, true}, {2, true}, {2, false}, {5, false}, {8, false}};
  for (auto [n, spin] : cases) {
    {
      auto g = make_shm_group(n, WireType::F32, spin);
      std::atomic<int> arrived{0};
      run_ranks(g, [&](Group& grp) {
        int bad = 0;
        for (int it = 0; it < kIters; ++it) {
          arrived.fetch_add(1);
          grp.barrier();
          // Everyone has arrived for this round, and nobody can be in the next one yet.
          bad += arrived.load() != n * (it + 1);
          grp.barrier();
        }
        EXPECT_EQ(bad, 0) << "n=" << n << " spin=" << spin;
      });
    }
  }
}

TEST(ShmGroup, AllGatherUnevenCounts) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    // Uneven, with zeros: rank r contributes (3r) mod 5 floats; then an all-zero round.
    std::vector<size_t> counts(n), zeros(n, 0);
    for (int r = 0; r < n; ++r) counts[r] = static_cast<size_t>(3 * r) % 5 + (r == 0 ? 1000 : 0);
    size_t total = 0;
    for (size_t c : counts) total += c;
    auto g = make_shm_group(n);
    run_ranks(g, [&](Group& grp) {
      for (int it = 0; it < 20; ++it) {
        const int me = grp.rank();
        std::vector<float> mine(counts[me]);
        for (size_t i = 0; i < mine.size(); ++i) mine[i] = shm_value(me, i, it);
        std::vector<float> out(total, -12345.0f);
        grp.all_gather(mine.data(), counts, out.data());
        size_t off = 0, bad = 0;
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < counts[r]; ++i) bad += out[off + i] != shm_value(r, i, it);
          off += counts[r];
        }
        EXPECT_EQ(bad, 0u) << "n=" << n << " rank=" << me;
        float sentinel = 7;
        grp.all_gather(nullptr, zeros, &sentinel);
        EXPECT_EQ(sentinel, 7.0f);
      }
    });
  }
}

TEST(ShmGroup, BroadcastFromEveryRoot) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    auto g = make_shm_group(n);
    run_ranks(g, [&](Group& grp) {
      for (size_t len : kSizes) {
        for (int root = 0; root < n; ++root) {
          std::vector<float> buf(len);
          for (size_t i = 0; i < len; ++i) buf[i] = shm_value(grp.rank(), i, root);
          grp.broadcast(buf.data(), len, root);
          size_t bad = 0;
          for (size_t i = 0; i < len; ++i) bad += buf[i] != shm_value(root, i, root);
          EXPECT_EQ(bad, 0u) << "n=" << n << " root=" << root << " len=" << len;
        }
      }
    });
  }
}

TEST(ShmGroup, ReduceScatterUnevenCounts) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<size_t> counts(n);
    for (int r = 0; r < n; ++r) counts[r] = r % 3 == 1 ? 0 : 1 + static_cast<size_t>(r) * 517;
    size_t total = 0;
    for (size_t c : counts) total += c;
    auto g = make_shm_group(n);
    run_ranks(g, [&](Group& grp) {
      for (int it = 0; it < 5; ++it) {
        const int me = grp.rank();
        std::vector<float> data(total);
        for (size_t i = 0; i < total; ++i) data[i] = shm_value(me, i, it);
        std::vector<float> out(counts[me] + 1, -1.0f);  // +1: must stay untouched
        grp.reduce_scatter_sum(data.data(), counts, out.data());
        size_t off = 0;
        for (int r = 0; r < me; ++r) off += counts[r];
        size_t bad = 0;
        for (size_t i = 0; i < counts[me]; ++i) bad += out[i] != expected_sum(n, off + i, it);
        EXPECT_EQ(bad, 0u) << "n=" << n << " rank=" << me;
        EXPECT_EQ(out[counts[me]], -1.0f);
      }
    });
  }
}

// With a bf16/f16 wire every contribution is rounded once before the f32 sum: the result must
// equal that reference exactly, differ from the plain f32 sum (rounding really happened), and
// stay within the format's rounding bound of the exact sum.
void check_wire(WireType wire, uint16_t (*to)(float), float (*from)(uint16_t), double unit_roundoff) {
  constexpr int kRanks = 4;
  constexpr size_t kLen = 4099;
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kLen));
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (auto& v : in)
    for (auto& x : v) x = dist(rng);
  std::vector<std::vector<float>> bufs = in;
  auto g = make_shm_group(kRanks, wire);
  run_ranks(g, [&](Group& grp) { grp.all_reduce_sum(bufs[grp.rank()].data(), kLen); });

  size_t differs_from_f32 = 0;
  double max_excess = 0;
  for (size_t i = 0; i < kLen; ++i) {
    float ref = 0, f32_sum = 0;
    double exact = 0, abs_sum = 0;
    for (int r = 0; r < kRanks; ++r) {
      ref += from(to(in[r][i]));
      f32_sum += in[r][i];
      exact += in[r][i];
      abs_sum += std::fabs(in[r][i]);
    }
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(bufs[r][i], ref) << "i=" << i << " rank=" << r;
    differs_from_f32 += ref != f32_sum;
    // Each input moves by at most unit_roundoff * |x|; the f32 adds add a little more.
    const double bound = (unit_roundoff + kRanks * 6e-8) * abs_sum;
    max_excess = std::max(max_excess, std::fabs(bufs[0][i] - exact) - bound);
  }
  EXPECT_GT(differs_from_f32, kLen / 2) << wire_type_name(wire);
  EXPECT_LE(max_excess, 0.0) << wire_type_name(wire);
}

TEST(ShmGroup, Bf16WireRoundsEachContribution) {
  check_wire(WireType::BF16, f32_to_bf16, bf16_to_f32, std::ldexp(1.0, -8));
}

TEST(ShmGroup, F16WireRoundsEachContribution) {
  check_wire(WireType::F16, f32_to_fp16, fp16_to_f32, std::ldexp(1.0, -11));
}

TEST(ShmGroup, StatsCountCallsAndBytes) {
  auto g = make_shm_group(2, WireType::BF16);
  run_ranks(g, [&](Group& grp) {
    std::vector<float> buf(100, 1.0f);
    grp.all_reduce_sum(buf.data(), 100);
    grp.all_reduce_sum(buf.data(), 50);
    grp.barrier();
    EXPECT_EQ(grp.stats().n_all_reduce, 2u);
    EXPECT_EQ(grp.stats().bytes_all_reduce, 150u * 2);  // bf16 wire: 2 bytes per float
    EXPECT_GT(grp.stats().wait_s, 0.0);
  });
  EXPECT_EQ(wire_type_name(WireType::F32), "f32");
  EXPECT_EQ(wire_type_name(WireType::BF16), "bf16");
  EXPECT_EQ(wire_type_name(WireType::F16), "f16");
}

TEST(ShmGroup, MismatchedSizesThrowOnEveryRankWithoutHanging) {
  auto g = make_shm_group(3);
  std::atomic<int> thrown{0};
  run_ranks(g, [&](Group& grp) {
    std::vector<float> buf(10, 1.0f);
    try {
      grp.all_reduce_sum(buf.data(), grp.rank() == 1 ? 9 : 10);
    } catch (const Error& e) {
      thrown.fetch_add(1);
    }
    // The group is still usable afterwards.
    grp.all_reduce_sum(buf.data(), 10);
    EXPECT_EQ(buf[0], 3.0f);
  });
  EXPECT_EQ(thrown.load(), 3);
}

TEST(ShmGroup, BadArgumentsThrow) {
  EXPECT_ERROR(make_shm_group(0), "group size 0 must be at least 1");
  auto g = make_shm_group(2);
  std::vector<float> x(4);
  EXPECT_ERROR(g[0]->broadcast(x.data(), 4, 2), "broadcast root 2 outside group of 2");
  EXPECT_ERROR(g[0]->all_gather(x.data(), {1, 2, 3}, x.data()), "3 counts for a group of 2");
}

}  // namespace
}  // namespace weft::parallel

namespace weft::parallel {
namespace {

// A rank that fails mid-step aborts the group: peers blocked in a collective get an error, not a hang.
TEST(ShmGroupAbort, PeersWaitingInACollectiveGetAnError) {
  for (bool spin : {true, false}) {
    auto group = make_shm_group(3, WireType::F32, spin);
    std::atomic<int> errors{0};
    std::vector<std::thread> peers;
    for (int r = 0; r < 2; ++r)
      peers.emplace_back([&, r] {
        std::vector<float> v(64, 1.f);
        try {
          group[r]->all_reduce_sum(v.data(), v.size());
        } catch (const Error&) {
          errors++;
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    group[2]->abort();
    for (auto& t : peers) t.join();
    EXPECT_EQ(errors.load(), 2);
    std::vector<float> v(4, 1.f);
    EXPECT_ERROR(group[0]->all_reduce_sum(v.data(), v.size()), "a peer device failed during a collective")
        << "an aborted group stays aborted";
  }
}

}  // namespace
}  // namespace weft::parallel
