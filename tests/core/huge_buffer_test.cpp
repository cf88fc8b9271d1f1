#include "core/huge_buffer.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace weft {
namespace {

TEST(HugeBuffer, ZeroFilledWritableAndMovable) {
  constexpr size_t kBytes = (size_t{4} << 20) + 123;  // past two huge pages, not a multiple of one
  HugeBuffer a(kBytes, "test", "a buffer");
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), kBytes);
  EXPECT_TRUE(std::all_of(a.data(), a.data() + kBytes, [](uint8_t b) { return b == 0; }));
  a.data()[kBytes - 1] = 7;
  uint8_t* const p = a.data();
  HugeBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[kBytes - 1], 7);
  HugeBuffer c(64, "test", "c");
  c = std::move(b);  // c's own mapping is released, b's taken over
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(HugeBuffer, EmptyHasNoMemory) {
  HugeBuffer e(0, "test", "nothing");
  EXPECT_EQ(e.data(), nullptr);
  EXPECT_EQ(e.size(), 0u);
}

TEST(HugeBuffer, ImpossibleSizeIsAnErrorNamingIt) {
  try {
    HugeBuffer h(std::numeric_limits<size_t>::max() / 2, "cpu", "the K cache");
    FAIL() << "allocated " << h.size() << " bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the K cache"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
