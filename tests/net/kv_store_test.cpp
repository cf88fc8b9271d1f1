// Rendezvous store: entries round-trip between clients of one group key; an entry written by an
// outsider (no key, or another group's key) or overwritten by one is rejected by the reader.
#include "net/kv_store.h"
#include "core/error.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

namespace weft::net {
namespace {

TEST(KvStore, ForgedEntriesAreRejected) {
  KvServer server("127.0.0.1");
  const HostPort hp{"127.0.0.1", server.port()};
  const std::vector<uint8_t> shared(20, 's');
  const auto group = rendezvous_key(shared, "weft/1/0/abcd");
  EXPECT_NE(group, rendezvous_key(shared, "weft/1/0/abce"));
  EXPECT_TRUE(rendezvous_key({}, "weft/1/0/abcd").empty());
  KvClient a(hp, 2000, group), b(hp, 2000, group), outsider(hp, 2000);
  KvClient other_group(hp, 2000, rendezvous_key(shared, "weft/2/0/ffff"));
  const std::vector<char> addr = {'1', '0', '.', '0', '.', '0', '.', '2'};
  a.set("rank0", addr);
  EXPECT_EQ(b.get("rank0"), addr);
  outsider.set("rank1", addr);
  try {
    b.get("rank1");
    FAIL() << "forged entry accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rendezvous entry 'rank1' failed authentication"), std::string::npos)
        << e.what();
  }
  // Each connection has its own server thread: a get on the writer's own connection orders the
  // write before the next read from another one.
  other_group.set("rank0", addr);  // an overwrite tagged for another group
  other_group.get("rank0");
  EXPECT_ERROR(b.get("rank0"), "entry 'rank0' failed authentication");
  a.set("rank0", addr);
  a.get("rank0");
  EXPECT_EQ(b.get("rank0"), addr);
  // Without a key (loopback mode) values pass unchanged.
  outsider.set("plain", addr);
  EXPECT_EQ(KvClient(hp, 2000).get("plain"), addr);
}

TEST(KvStore, MessageDecodersRejectMalformedBytes) {
  EXPECT_ERROR(read_kv_set(std::vector<uint8_t>{5, 0, 0, 0, 'a'}),
               "kv key: count 5 needs more than the 1 bytes left");  // key shorter than its length
  EXPECT_ERROR(read_kv_get(std::vector<uint8_t>{1, 0, 0, 0, 'a', 1, 0}),
               "message truncated reading kv timeout");  // truncated timeout
  EXPECT_ERROR(read_kv_get(std::vector<uint8_t>{1, 0, 0, 0, 'a', 0xff, 0xff, 0xff, 0xff}),
               "timeout 4294967295 ms is over an hour");  // timeout over an hour
  const auto m = read_kv_get(std::vector<uint8_t>{1, 0, 0, 0, 'a', 0x10, 0x27, 0, 0});
  EXPECT_EQ(m.key, "a");
  EXPECT_EQ(m.timeout_ms, 10000);
}

}  // namespace
}  // namespace weft::net
