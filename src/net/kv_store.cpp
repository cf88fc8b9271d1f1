#include "net/kv_store.h"

#include "core/error.h"
#include "net/frame.h"
#include "net/handshake.h"
#include "net/session_mac.h"
#include "net/wire.h"

#include <openssl/crypto.h>

#include <chrono>

namespace weft::net {
namespace {
constexpr int kStopPollMs = 100;  // how often idle server threads look at the stop flag
constexpr size_t kMaxKeyBytes = 1024;
std::span<const uint8_t> as_bytes(const std::vector<char>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size()};
}

MacTag entry_tag(const std::vector<uint8_t>& group_key, const std::string& key, std::span<const uint8_t> value) {
  ByteWriter name;
  name.str(key);  // length-prefixed, so (key, value) pairs cannot be re-split
  return mac_tag(group_key, {name.data(), value});
}

}  // namespace

KvSetMsg read_kv_set(std::span<const uint8_t> payload) {
  ByteReader r(payload);
  KvSetMsg m;
  m.key = r.str("kv key", kMaxKeyBytes);
  auto v = r.bytes("kv value", r.left());
  m.value.assign(v.begin(), v.end());
  return m;
}

KvGetMsg read_kv_get(std::span<const uint8_t> payload) {
  ByteReader r(payload);
  KvGetMsg m;
  m.key = r.str("kv key", kMaxKeyBytes);
  const uint32_t t = r.u32("kv timeout");
  r.finish("kv get");
  if (t > 3600 * 1000) fail("net", "kv get: timeout {} ms is over an hour", t);
  m.timeout_ms = static_cast<int>(t);
  return m;
}

std::vector<uint8_t> rendezvous_key(const std::vector<uint8_t>& shared_key, const std::string& prefix) {
  if (shared_key.empty()) return {};
  const std::string label = "weft-rendezvous " + prefix;
  return hmac_sha256(shared_key, std::vector<uint8_t>(label.begin(), label.end()));
}

std::vector<char> seal_entry(const std::vector<uint8_t>& group_key, const std::string& key,
                             const std::vector<char>& value) {
  if (group_key.empty()) return value;
  const MacTag t = entry_tag(group_key, key, as_bytes(value));
  std::vector<char> out = value;
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::vector<char> open_entry(const std::vector<uint8_t>& group_key, const std::string& key, std::vector<char> stored) {
  if (group_key.empty()) return stored;
  if (stored.size() < kMacTagBytes)
    fail("net", "rendezvous entry '{}' failed authentication: {} bytes carry no tag (forged?)", key, stored.size());
  const size_t n = stored.size() - kMacTagBytes;
  const MacTag want = entry_tag(group_key, key, std::span<const uint8_t>(as_bytes(stored).data(), n));
  if (CRYPTO_memcmp(want.data(), stored.data() + n, kMacTagBytes) != 0)
    fail("net", "rendezvous entry '{}' failed authentication (forged, or written by another group)", key);
  stored.resize(n);
  return stored;
}

KvServer::KvServer(const std::string& host) : listener_(HostPort{host, 0}) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

KvServer::~KvServer() {
  stop_ = true;
  cv_.notify_all();
  acceptor_.join();
  for (auto& t : clients_) t.join();
}

void KvServer::accept_loop() {
  while (!stop_) {
    Socket s = listener_.accept(kStopPollMs);
    if (s.valid()) clients_.emplace_back([this, s = std::move(s)]() mutable { serve(std::move(s)); });
  }
}

void KvServer::serve(Socket s) {
  try {
    while (!stop_) {
      if (!s.readable(kStopPollMs)) continue;
      Frame f = recv_frame(s, 1000, 5000);
      if (f.type == MsgType::KvSet) {
        KvSetMsg m = read_kv_set(f.payload);
        std::lock_guard lock(mu_);
        kv_[m.key] = std::move(m.value);
        cv_.notify_all();
      } else if (f.type == MsgType::KvGet) {
        const KvGetMsg m = read_kv_get(f.payload);
        std::vector<char> value;
        {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::milliseconds(m.timeout_ms), [&] { return stop_ || kv_.count(m.key); }) ||
              stop_)
            return;  // the client times out on its side and names the key
          value = kv_[m.key];
        }
        send_frame(s, MsgType::KvValue, {reinterpret_cast<const uint8_t*>(value.data()), value.size()}, 5000);
      } else {
        return;  // not a store client
      }
    }
  } catch (const Error&) {
    // A client that goes away ends only its own connection.
  }
}

KvClient::KvClient(const HostPort& server, int timeout_ms, std::vector<uint8_t> group_key)
    : s_(connect_tcp(server, timeout_ms)), timeout_ms_(timeout_ms), group_key_(std::move(group_key)) {}

void KvClient::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard lock(mu_);
  ByteWriter w;
  w.str(key);
  w.bytes(as_bytes(seal_entry(group_key_, key, value)));
  send_frame(s_, MsgType::KvSet, w.data(), timeout_ms_);
}

std::vector<char> KvClient::get(const std::string& key) { return get(key, timeout_ms_); }

std::vector<char> KvClient::get(const std::string& key, int timeout_ms) {
  std::lock_guard lock(mu_);
  ByteWriter w;
  w.str(key);
  w.u32(static_cast<uint32_t>(timeout_ms));
  send_frame(s_, MsgType::KvGet, w.data(), timeout_ms_);
  Frame f;
  try {
    f = expect_frame(s_, MsgType::KvValue, timeout_ms + 1000);
  } catch (const Error& e) {
    fail("net", "rendezvous: waiting for key '{}': {}", key, e.what());
  }
  return open_entry(group_key_, key, {f.payload.begin(), f.payload.end()});
}

}  // namespace weft::net
