// weft::Error carries origin, device and blame as fields; what() is the one line the CLI prints.
#include "core/error.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(Error, RendersOriginDeviceAndMessage) {
  const Error plain("gguf", "bad magic");
  EXPECT_STREQ(plain.what(), "[gguf] bad magic");
  EXPECT_EQ(plain.device(), "");
  EXPECT_EQ(plain.blame(), Blame::Own);
  const Error named("net", "no reply", "tcp://h:1", Blame::Peer);
  EXPECT_STREQ(named.what(), "[net] tcp://h:1: no reply");
  EXPECT_EQ(named.message(), "no reply");
  EXPECT_EQ(named.blame(), Blame::Peer);
}

TEST(Error, OnDeviceNamesADeviceOnlyOnce) {
  const Error e = Error("gloo", "rank 1: all_reduce failed", {}, Blame::Peer).on_device("cpu:0");
  EXPECT_STREQ(e.what(), "[gloo] cpu:0: rank 1: all_reduce failed");
  EXPECT_EQ(e.blame(), Blame::Peer);  // kept
  EXPECT_EQ(e.on_device("cpu:1").device(), "cpu:0");
}

TEST(Error, FailHelpersSetTheFields) {
  try {
    fail_on("net", "tcp://w:2", "closed after {} ms", 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.device(), "tcp://w:2");
    EXPECT_EQ(e.message(), "closed after 5 ms");
  }
  try {
    fail_by_peer("shm", "a peer failed");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.blame(), Blame::Peer);
  }
}

}  // namespace
}  // namespace weft
