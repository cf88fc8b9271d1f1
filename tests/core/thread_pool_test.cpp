#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace weft {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOnceWithItsIndex) {
  for (int n : {1, 2, 3, 5}) {
    for (bool spin : {true, false}) {
      ThreadPool pool(n, {}, spin);
      for (int round = 0; round < 200; ++round) {  // reuse: catches lost wake-ups
        std::vector<std::atomic<int>> seen(n);
        pool.run([&](int ith, int nth) {
          EXPECT_EQ(nth, n);
          seen[ith]++;
        });
        for (auto& s : seen) ASSERT_EQ(s.load(), 1);
      }
    }
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeOnceOnAlignedChunks) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 15, 16, 17, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, 16, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 16, 0);
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ParallelStealCoversTheRangeOnceInWholeChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 15, 16, 17, 1000})
      for (int64_t chunk : {0, 1, 16, 64, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_steal(n, chunk, [&](int64_t b, int64_t e) {
          const int64_t c = std::max<int64_t>(chunk, 1);
          EXPECT_EQ(b % c, 0);
          EXPECT_TRUE(e - b == c || e == n) << b << ".." << e;
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n " << n << ", chunk " << chunk;
      }
  }
}

// A thread held up in its first chunk (a core shared with another process, say) leaves the rest of
// its range to the others: the held thread waits until every other chunk is done, which under a
// static split (each thread its own half) would never happen.
TEST(ThreadPool, ParallelStealHandsAHeldThreadsChunksToTheOthers) {
  ThreadPool pool(2);
  constexpr int64_t kChunks = 64;
  std::atomic<int64_t> done{0};
  std::vector<std::thread::id> ran_by(kChunks);
  pool.parallel_steal(kChunks, 1, [&](int64_t b, int64_t) {
    ran_by[b] = std::this_thread::get_id();
    if (b != 0) {
      done++;
      return;
    }
    // The first chunk of thread 0's range: wait (bounded) until the other chunks are done.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (done.load() < kChunks - 1 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(done.load(), kChunks - 1);
  EXPECT_EQ(std::count(ran_by.begin(), ran_by.end(), ran_by[0]), 1) << "the held thread ran more than its first chunk";
}

TEST(ThreadPool, SplitRangeIsContiguousAndComplete) {
  for (int nth : {1, 2, 7}) {
    int64_t at = 0;
    for (int i = 0; i < nth; ++i) {
      auto [b, e] = split_range(100, 8, i, nth);
      EXPECT_EQ(b, at);
      at = e;
    }
    EXPECT_EQ(at, 100);
  }
}

}  // namespace
}  // namespace weft
