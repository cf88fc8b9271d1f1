// The worker's shard cache: entries are private to their owner (files 0600, directory 0700, whatever
// the umask), and their total size stays under the cap, the least recently used going first.
#include "device/remote/model_store.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace weft::device::remote {
namespace {

namespace fs = std::filesystem;

class ShardCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("weft_shard_cache_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return (dir_ / "cache").string(); }

  fs::path dir_;
};

std::vector<uint8_t> bytes_of(size_t n, uint8_t fill) { return std::vector<uint8_t>(n, fill); }

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Last used `seconds_ago` (the access time the cache orders entries by).
void used_ago(const std::string& path, int seconds_ago) {
  const timespec times[2] = {{::time(nullptr) - seconds_ago, 0}, {0, UTIME_OMIT}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST_F(ShardCache, EntriesAreReadableByTheirOwnerOnly) {
  const mode_t old = ::umask(0);  // a permissive umask must not widen them
  cache_store(dir(), "k1", bytes_of(100, 1));
  ::umask(old);
  const auto entry = cache_find(dir(), "k1");
  ASSERT_TRUE(entry);
  EXPECT_EQ(mode_of(*entry), 0600u);
  EXPECT_EQ(mode_of(dir()), 0700u);
}

TEST_F(ShardCache, TotalSizeIsCappedByEvictingTheLeastRecentlyUsed) {
  constexpr uint64_t kCap = 2500;
  cache_store(dir(), "a", bytes_of(1000, 1), kCap);
  cache_store(dir(), "b", bytes_of(1000, 2), kCap);
  const auto a = cache_find(dir(), "a"), b = cache_find(dir(), "b");
  ASSERT_TRUE(a && b);
  used_ago(*a, 200);
  used_ago(*b, 100);
  ASSERT_TRUE(cache_find(dir(), "a"));  // used now: b is the least recently used
  cache_store(dir(), "c", bytes_of(1000, 3), kCap);
  EXPECT_TRUE(cache_find(dir(), "a"));
  EXPECT_FALSE(cache_find(dir(), "b"));
  EXPECT_TRUE(cache_find(dir(), "c"));
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir())) total += fs::file_size(e.path());
  EXPECT_LE(total, kCap);
}

TEST_F(ShardCache, EntryOverTheCapIsNotStoredAndEvictsNothing) {
  cache_store(dir(), "a", bytes_of(1000, 1), 1500);
  cache_store(dir(), "big", bytes_of(2000, 2), 1500);
  EXPECT_FALSE(cache_find(dir(), "big"));
  EXPECT_TRUE(cache_find(dir(), "a"));
}

}  // namespace
}  // namespace weft::device::remote
