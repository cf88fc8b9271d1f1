#include "net/kv_store.h"

#include "core/error.h"
#include "net/frame.h"
#include "net/wire.h"

#include <chrono>

namespace weft::net {
namespace {
constexpr int kPollMs = 100;        // how often idle server threads look at the stop flag
constexpr size_t kMaxKeyBytes = 1024;
}  // namespace

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
    Socket s = listener_.accept(kPollMs);
    if (s.valid()) clients_.emplace_back([this, s = std::move(s)]() mutable { serve(std::move(s)); });
  }
}

void KvServer::serve(Socket s) {
  try {
    while (!stop_) {
      if (!s.readable(kPollMs)) continue;
      Frame f = recv_frame(s, 1000, 5000);
      ByteReader r(f.payload);
      if (f.type == MsgType::KvSet) {
        std::string key = r.str("kv key", kMaxKeyBytes);
        auto v = r.bytes("kv value", r.left());
        std::lock_guard lock(mu_);
        kv_[key].assign(v.begin(), v.end());
        cv_.notify_all();
      } else if (f.type == MsgType::KvGet) {
        std::string key = r.str("kv key", kMaxKeyBytes);
        const int timeout_ms = static_cast<int>(r.u32("kv timeout"));
        r.finish("kv get");
        std::vector<char> value;
        {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return stop_ || kv_.count(key); }) || stop_)
            return;  // the client times out on its side and names the key
          value = kv_[key];
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

KvClient::KvClient(const HostPort& server, int timeout_ms)
    : s_(connect_tcp(server, timeout_ms)), timeout_ms_(timeout_ms) {}

void KvClient::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard lock(mu_);
  ByteWriter w;
  w.str(key);
  w.bytes({reinterpret_cast<const uint8_t*>(value.data()), value.size()});
  send_frame(s_, MsgType::KvSet, w.data(), timeout_ms_);
}

std::vector<char> KvClient::get(const std::string& key) { return get(key, timeout_ms_); }

std::vector<char> KvClient::get(const std::string& key, int timeout_ms) {
  std::lock_guard lock(mu_);
  ByteWriter w;
  w.str(key);
  w.u32(static_cast<uint32_t>(timeout_ms));
  send_frame(s_, MsgType::KvGet, w.data(), timeout_ms_);
  try {
    Frame f = expect_frame(s_, MsgType::KvValue, timeout_ms + 1000);
    return {f.payload.begin(), f.payload.end()};
  } catch (const Error& e) {
    fail("net", "rendezvous: waiting for key '{}': {}", key, e.what());
  }
}

}  // namespace weft::net
