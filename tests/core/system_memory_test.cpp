#include "core/system_memory.h"

#include <gtest/gtest.h>

#include <unistd.h>

namespace weft {
namespace {

TEST(SystemMemory, AvailableIsPositiveAndAtMostPhysical) {
  const auto avail = available_memory_bytes();
  ASSERT_TRUE(avail.has_value()) << "no MemAvailable in /proc/meminfo";
  const uint64_t physical =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  EXPECT_GT(*avail, 0u);
  EXPECT_LE(*avail, physical);
}

}  // namespace
}  // namespace weft
