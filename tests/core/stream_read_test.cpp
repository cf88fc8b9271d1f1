#include "core/stream_read.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace weft {
namespace {

TEST(StreamRead, WindowsAreWholePagesOfTheBuffer) {
  constexpr size_t kBytes = (size_t{10} << 20) + 123;
  StreamRead s(2, kBytes, 3);
  EXPECT_EQ(s.threads(), 2);
  EXPECT_EQ(s.window_bytes(), kBytes / 3 / 4096 * 4096);
  for (int i = 0; i < 4; ++i) {  // past the last window, back to the first
    const double bps = s.read();
    EXPECT_TRUE(std::isfinite(bps) && bps > 0) << bps;
  }
}

TEST(StreamRead, ABufferShortOfAPagePerWindowFails) {
  EXPECT_THROW(StreamRead(1, 4096, 2), Error);
  EXPECT_NO_THROW(StreamRead(1, 8192, 2));
}

TEST(StreamRead, DramStreamWalksPastTheLastLevelCache) {
  EXPECT_GE(dram_stream_bytes(), size_t{256} << 20);
  EXPECT_GE(dram_stream_bytes(), 8 * last_level_cache_bytes());
}

}  // namespace
}  // namespace weft
