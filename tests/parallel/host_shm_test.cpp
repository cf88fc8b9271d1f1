// Same-host shared-memory all-reduces (host_shm.h), each rank with its own mapping of the segment
// as separate processes have: exact sums over many rounds of changing sizes (the two alternating
// buffer sets are where one barrier too few shows up), sizes that disagree, and the three ways a
// waiting rank stops waiting: abort, a peer process that exited, the timeout.
#include "parallel/host_shm.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <thread>

namespace weft::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 64;  // small rounds, so a few hundred floats take several
constexpr int kTimeoutMs = 20000;

// Integers below 2^24 add exactly in f32: any order gives the same bits.
float host_value(int rank, size_t i, int round) { return static_cast<float>((i * 7 + round) % 101) + 1000.0f * rank; }

// One segment, one mapping per rank; fn(rank, shm) on a thread per rank; rethrows the first error.
void run_ranks(int n, const std::function<void(int, HostShm&)>& fn) {
  std::vector<std::unique_ptr<HostShm>> shm;
  shm.push_back(HostShm::create(n, kChunk));
  for (int r = 1; r < n; ++r) shm.push_back(HostShm::open(shm[0]->name(), r, n));
  shm[0]->unlink();
  std::vector<std::exception_ptr> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r, *shm[r]);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

TEST(HostShm, SumsAreExactOverManyRoundsOfChangingSizes) {
  const size_t sizes[] = {0, 1, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 7, 5, 1000};
  for (int n : {1, 2, 3, 5})
    run_ranks(n, [&](int rank, HostShm& shm) {
      for (int round = 0; round < 40; ++round) {
        const size_t len = sizes[round % std::size(sizes)];
        std::vector<float> x(len);
        for (size_t i = 0; i < len; ++i) x[i] = host_value(rank, i, round);
        shm.all_reduce_sum(x.data(), len, WireType::F32, /*spin=*/rank % 2 == 0, kTimeoutMs);
        for (size_t i = 0; i < len; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += host_value(q, i, round);
          ASSERT_EQ(x[i], want) << n << " ranks, round " << round << ", n=" << len << ", i=" << i;
        }
      }
    });
}

// bf16: each rank's value rounded once on the way; every rank ends with the same bits.
TEST(HostShm, HalfPrecisionWireRoundsEachValueOnceAndAgreesEverywhere) {
  constexpr size_t kLen = 300;
  std::vector<std::vector<float>> out(3);
  run_ranks(3, [&](int rank, HostShm& shm) {
    std::vector<float> x(kLen);
    for (size_t i = 0; i < kLen; ++i) x[i] = 1.0f + static_cast<float>(i) * 0x1p-12f + static_cast<float>(rank);
    shm.all_reduce_sum(x.data(), kLen, WireType::BF16, true, kTimeoutMs);
    out[rank] = x;
  });
  double worst = 0;
  for (size_t i = 0; i < kLen; ++i) {
    const double exact = 3 * (1.0 + i * 0x1p-12) + 3;
    worst = std::max(worst, std::abs(out[0][i] - exact) / exact);
  }
  EXPECT_GT(worst, 0.0) << "no rounding: the wire was not bf16";
  EXPECT_LT(worst, 0x1p-8);
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

TEST(HostShm, RanksDisagreeingOnTheSizeAllFail) {
  std::atomic<int> failed{0};
  run_ranks(2, [&](int rank, HostShm& shm) {
    std::vector<float> x(10);
    try {
      shm.all_reduce_sum(x.data(), rank == 0 ? 10 : 9, WireType::F32, true, kTimeoutMs);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("different sizes"), std::string::npos) << e.what();
      ++failed;
    }
  });
  EXPECT_EQ(failed.load(), 2);
}

TEST(HostShm, AbortReleasesAWaitingRank) {
  auto a = HostShm::create(2, kChunk);
  auto b = HostShm::open(a->name(), 1, 2);
  a->unlink();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    b->abort();  // the other rank's handle: the abort crosses mappings
  });
  float x = 1;
  const auto t0 = Clock::now();
  EXPECT_ERROR(a->all_reduce_sum(&x, 1, WireType::F32, true, kTimeoutMs), "a peer device failed during a collective");
  aborter.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(kTimeoutMs / 4));
}

// The peer is a child process that maps the segment and exits without arriving; it stays a
// zombie (not reaped) while the parent waits, which must count as exited too.
TEST(HostShm, APeerProcessThatExitedIsAnErrorAtOnce) {
  auto a = HostShm::create(2, kChunk);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto b = HostShm::open(a->name(), 1, 2);
    ::_exit(0);
  }
  bool exited = false;  // after opening: it exits only then; WNOWAIT leaves it a zombie
  for (int i = 0; i < 2000 && !exited; ++i) {
    siginfo_t info{};
    exited = ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(exited);
  a->unlink();
  float x = 1;
  const auto t0 = Clock::now();
  EXPECT_ERROR(a->all_reduce_sum(&x, 1, WireType::F32, false, kTimeoutMs), "has exited");
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(kTimeoutMs / 4));
  ::waitpid(child, nullptr, 0);
}

TEST(HostShm, APeerThatNeverArrivesTimesOut) {
  auto a = HostShm::create(2, kChunk);
  auto b = HostShm::open(a->name(), 1, 2);  // this process: alive, but never arrives
  a->unlink();
  float x = 1;
  const auto t0 = Clock::now();
  EXPECT_ERROR(a->all_reduce_sum(&x, 1, WireType::F32, true, 200), "did not arrive within 200 ms");
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(200));
}

TEST(HostShm, OpenRefusesWhatIsNotAGroupSegment) {
  auto a = HostShm::create(2, kChunk);
  EXPECT_ERROR(HostShm::open(a->name(), 1, 3), "does not hold a group of 3");
  EXPECT_ERROR(HostShm::open(a->name(), 0, 2), "bad segment name");  // rank 0 creates, never opens
  EXPECT_ERROR(HostShm::open("/etc/passwd", 1, 2), "bad segment name");
  EXPECT_ERROR(HostShm::open("/weft-" + std::string(32, 'g'), 1, 2), "bad segment name");
  EXPECT_ERROR(HostShm::open("/weft-" + std::string(32, '0'), 1, 2), "cannot open shared memory");
  // The creator's own name, once unlinked, is gone: nothing stays in /dev/shm.
  a->unlink();
  EXPECT_LT(::shm_open(a->name().c_str(), O_RDONLY, 0), 0);
  EXPECT_ERROR(HostShm::open(a->name(), 1, 2), "cannot open shared memory");
}

}  // namespace
}  // namespace weft::parallel
