#include "core/huge_buffer.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

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

// Pages of [p, p + n) resident now, from mincore.
size_t resident_pages(const uint8_t* p, size_t n) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((n + page - 1) / page);
  if (::mincore(const_cast<uint8_t*>(p), n, v.data()) != 0) return 0;
  return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; }));
}

TEST(HugeBuffer, PopulateBacksEveryPageWithZeros) {
  constexpr size_t kBytes = (size_t{6} << 20) + 4096 * 3;
  HugeBuffer a(kBytes, "test", "a buffer", /*huge=*/false);
  const size_t pages = kBytes / static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_pages(a.data(), kBytes), 0u);  // fresh anonymous memory: nothing backed yet
  ASSERT_TRUE(a.populate()) << "MADV_POPULATE_WRITE needs Linux 5.14";
  EXPECT_EQ(resident_pages(a.data(), kBytes), pages);
  EXPECT_TRUE(std::all_of(a.data(), a.data() + kBytes, [](uint8_t b) { return b == 0; }));
  HugeBuffer empty;
  EXPECT_TRUE(empty.populate());  // no pages, nothing to do
  EXPECT_EQ(empty.data(), nullptr);
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
