// File digests: the right SHA-256, remembered in the file's extended attribute only while the
// size and mtime it was stamped with still hold.
#include "net/content_hash.h"

#include <gtest/gtest.h>

#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace weft::net {
namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ContentHash, FileDigestIsSha256AndTheXattrRecordIsUsedOnlyWhileTheFileIsUnchanged) {
  const std::string dir = testing::TempDir() + "/weft_hash";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/m.gguf", content = "some model bytes";
  std::ofstream(path) << content;
  EXPECT_EQ(sha256_hex(bytes_of("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_file_hex(path), sha256_hex(bytes_of(content)));
  EXPECT_EQ(sha256_file_hex(path, true), sha256_hex(bytes_of(content)));
  char rec[128];
  const ssize_t n = ::getxattr(path.c_str(), kDigestXattr, rec, sizeof(rec));
  if (n <= 0) GTEST_SKIP() << "no user xattrs on " << dir << ": digests are not kept in files here";
  std::string record(rec, static_cast<size_t>(n));
  ASSERT_EQ(record.substr(record.size() - kSha256HexChars), sha256_hex(bytes_of(content)));
  // A record for this size and mtime is trusted: a new path to the same file (a hard link, so this
  // process has no digest for it yet) reads the planted one.
  const std::string fake(kSha256HexChars, 'a');
  const std::string planted = record.substr(0, record.size() - kSha256HexChars) + fake;
  ASSERT_EQ(::setxattr(path.c_str(), kDigestXattr, planted.data(), planted.size(), 0), 0);
  std::filesystem::create_hard_link(path, dir + "/link.gguf");
  EXPECT_EQ(sha256_file_hex(dir + "/link.gguf", true), fake);
  EXPECT_EQ(sha256_file_hex(dir + "/link.gguf"), sha256_hex(bytes_of(content)));  // without: always read
  // Rewritten (new mtime, same size): the stale record is ignored.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string other = "other model byte";
  ASSERT_EQ(other.size(), content.size());
  std::ofstream(path) << other;
  EXPECT_EQ(sha256_file_hex(dir + "/link.gguf", true), sha256_hex(bytes_of(other)));
}

}  // namespace
}  // namespace weft::net
