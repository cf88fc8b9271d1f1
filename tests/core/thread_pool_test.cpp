#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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
