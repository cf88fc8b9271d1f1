// The sliding-window KV cache's rule (graph/kv_window.h): rows per slot, when a slot moves on and
// to where, and what a sequence can still continue from.
#include "graph/kv_window.h"

#include <gtest/gtest.h>

namespace weft::graph {
namespace {

TEST(KvWindow, RowsAreTheContextOrTwiceTheWindowAndAStep) {
  EXPECT_EQ(kv_window_rows(4096, 512, 512), 2048);
  EXPECT_EQ(kv_window_rows(1024, 512, 512), 1024) << "a short context is kept whole";
}

TEST(KvWindow, ASlotMovesOnlyWhenAStepWouldWritePastItsRows) {
  const int64_t w = 4, rows = kv_window_rows(1000, w, 2);  // 12
  EXPECT_EQ(next_kv_window_base(0, 0, 2, w, rows), 0);
  EXPECT_EQ(next_kv_window_base(0, 10, 12, w, rows), 0) << "rows 10, 11 still fit";
  EXPECT_EQ(next_kv_window_base(0, 12, 13, w, rows), 9) << "keeps positions 9..11, which 12 sees";
  EXPECT_EQ(next_kv_window_base(9, 13, 14, w, rows), 9);
  // Whatever the steps, a step's keys fit from the new base on, and the kept run never overlaps
  // where it moves to.
  int64_t base = 0;
  for (int64_t pos = 0; pos < 500; pos += 1 + pos % 2) {
    const int64_t n = 1 + pos % 2, next = next_kv_window_base(base, pos, pos + n, w, rows);
    ASSERT_LE(pos + n - next, rows) << pos;
    ASSERT_LE(std::max<int64_t>(pos - w + 1, 0), std::max(next, int64_t{0}) + (pos - next)) << pos;
    if (next != base) ASSERT_GE(next - base, pos - next) << "the kept rows and their new place overlap at " << pos;
    base = next;
  }
  EXPECT_GT(base, 0);
}

TEST(KvWindow, TheFloorIsWhereTheWindowStillHoldsEveryKey) {
  EXPECT_EQ(kv_window_floor(0, 4), 0);
  EXPECT_EQ(kv_window_floor(9, 4), 12);  // position 12 sees 9..12
}

}  // namespace
}  // namespace weft::graph
