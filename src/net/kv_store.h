// A tiny key-value store over weft frames, run by the coordinator for one rendezvous: each rank
// publishes its transport address under a key and reads its peers' (what gloo::rendezvous needs).
// Lives only while the group connects; keys are small, gets wait (with a timeout) for the key.
//
// The store itself is plain TCP that anyone who can reach it may write to. When the session uses
// a key, every value is stored with a tag, HMAC-SHA256(group key, key name || value) truncated to
// 16 bytes, where the group key is derived from the shared key and the group's prefix (which holds
// fresh random bytes and reaches the workers inside the authenticated GroupSetup). A reader
// rejects an entry whose tag fails, so an outsider cannot redirect a rank to an address of its
// choosing or splice entries between groups; it can still overwrite entries to make the rendezvous
// fail (a denial of service, reported as such). The Gloo traffic that follows (all-reduces between
// the published addresses) is plain TCP: neither encrypted nor authenticated, so a party on the
// path between workers can read or alter activations; run tensor-parallel groups on a trusted network.
#pragma once

#include "net/socket.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace weft::net {

// The store messages, decoded (each throws weft::Error("net", ...) on malformed bytes).
struct KvSetMsg {
  std::string key;
  std::vector<char> value;
};
struct KvGetMsg {
  std::string key;
  int timeout_ms = 0;
};
KvSetMsg read_kv_set(std::span<const uint8_t> payload);
KvGetMsg read_kv_get(std::span<const uint8_t> payload);

// The key that tags one group's entries: empty without a shared key (entries are then untagged).
std::vector<uint8_t> rendezvous_key(const std::vector<uint8_t>& shared_key, const std::string& prefix);
// A stored value: the value and, with a group key, its tag.
std::vector<char> seal_entry(const std::vector<uint8_t>& group_key, const std::string& key,
                             const std::vector<char>& value);
// The value inside a stored one; throws when its tag does not verify.
std::vector<char> open_entry(const std::vector<uint8_t>& group_key, const std::string& key, std::vector<char> stored);

class KvServer {
 public:
  explicit KvServer(const std::string& host);  // listens on an ephemeral port of host
  ~KvServer();
  uint16_t port() const { return listener_.port(); }

 private:
  void accept_loop();
  void serve(Socket s);

  Listener listener_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> kv_;
  std::thread acceptor_;
  std::vector<std::thread> clients_;
};

class KvClient {
 public:
  // group_key: from rendezvous_key (empty: values are neither tagged nor checked).
  KvClient(const HostPort& server, int timeout_ms, std::vector<uint8_t> group_key = {});
  void set(const std::string& key, const std::vector<char>& value);
  // Waits until the key is set (up to the timeout given here or at construction).
  std::vector<char> get(const std::string& key);
  std::vector<char> get(const std::string& key, int timeout_ms);

 private:
  std::mutex mu_;  // one request at a time on the connection
  Socket s_;
  int timeout_ms_;
  std::vector<uint8_t> group_key_;
};

}  // namespace weft::net
