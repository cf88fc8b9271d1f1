// LAN discovery: the datagrams round trip and every malformed one is a clear error; an Announcer
// answers a query on loopback (multicast and broadcast), and what it announces arrives as sent.
#include "net/announcement.h"
#include "net/discovery.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <unistd.h>

namespace weft::net {
namespace {

Announcement sample() {
  Announcement a;
  a.name = "rack-3.lan";
  a.port = 7070;
  a.threads = 12;
  a.memory_bytes = 64ull << 30;
  a.version = {kProtocolMajor, 3};
  return a;
}

TEST(Announcement, RoundTrips) {
  const std::optional<Announcement> got = decode_discovery(encode_announcement(sample()));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->name, "rack-3.lan");
  EXPECT_EQ(got->port, 7070);
  EXPECT_EQ(got->threads, 12u);
  EXPECT_EQ(got->memory_bytes, 64ull << 30);
  EXPECT_EQ(got->version.major, kProtocolMajor);
  EXPECT_EQ(got->version.minor, 3);
  EXPECT_FALSE(decode_discovery(encode_query()).has_value());  // a query
}

TEST(Announcement, MalformedDatagramsAreErrors) {
  const std::vector<uint8_t> good = encode_announcement(sample());
  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[at] = v;
    return b;
  };
  EXPECT_ERROR(decode_discovery(with(0, 'X')), "bad magic");
  EXPECT_ERROR(decode_discovery(with(4, 9)), "unknown kind 9");
  EXPECT_ERROR(decode_discovery(std::vector<uint8_t>{}), "truncated reading magic");
  for (size_t n = 5; n < good.size(); ++n)  // every truncation
    EXPECT_ERROR(decode_discovery(std::span(good).first(n)), n < 27 ? "truncated" : "bytes left") << n << " bytes";
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_ERROR(decode_discovery(longer), "trailing bytes");
  std::vector<uint8_t> query = encode_query();
  query.push_back(1);
  EXPECT_ERROR(decode_discovery(query), "trailing bytes");
  EXPECT_ERROR(decode_discovery(std::vector<uint8_t>(kMaxDiscoveryDatagramBytes + 1, 0)), "at most 512");
  // Fields: port at 9, threads at 11, name's length at 23 and its first byte at 27.
  std::vector<uint8_t> port0 = with(9, 0);
  port0[10] = 0;
  EXPECT_ERROR(decode_discovery(port0), "port 0");
  EXPECT_ERROR(decode_discovery(with(14, 1)), "threads");
  EXPECT_ERROR(decode_discovery(with(26, 1)), "name");
  EXPECT_ERROR(decode_discovery(with(27, 0x1b)), "not printable");
  Announcement bad = sample();
  bad.name = "a\nb";
  EXPECT_ERROR(encode_announcement(bad), "printable");
}

// A port of this test process's own, so that parallel test runs do not hear each other.
uint16_t test_port(int k) { return static_cast<uint16_t>(40000 + (::getpid() * 7 + k) % 20000); }

void expect_finds(const std::string& group, int k) {
  DiscoveryOptions o;
  o.address = {group, test_port(k)};
  o.interface = "127.0.0.1";
  Announcement a = sample(), b = sample();
  b.port = 7071;
  b.version.major = kProtocolMajor + 1;  // reported as announced: the coordinator decides
  Announcer one(o, a, true), two(o, b, true);
  int malformed = 0;
  const std::vector<FoundWorker> found = discover(o, 1000, &malformed);
  ASSERT_EQ(found.size(), 2u) << "on " << group;
  EXPECT_EQ(malformed, 0);
  for (const FoundWorker& f : found) {
    EXPECT_EQ(f.host, "127.0.0.1");
    EXPECT_EQ(f.announced.version.major, f.announced.port == 7070 ? kProtocolMajor : kProtocolMajor + 1);
  }
}

TEST(Discovery, FindsAnnouncersByMulticastOnLoopback) { expect_finds("239.255.87.70", 0); }
TEST(Discovery, FindsAnnouncersByBroadcastOnLoopback) { expect_finds("127.255.255.255", 1); }

TEST(Discovery, NobodyAnsweringIsAnEmptyList) {
  DiscoveryOptions o;
  o.address = {"239.255.87.70", test_port(2)};
  o.interface = "127.0.0.1";
  EXPECT_TRUE(discover(o, 300).empty());
  o.address.host = "not-an-address";
  EXPECT_ERROR(discover(o, 300), "not an IPv4 address");
}

}  // namespace
}  // namespace weft::net
