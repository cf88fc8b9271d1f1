// The worker side of `weft worker`: serves one coordinator at a time. A session is: handshake,
// optional group setup (Gloo rendezvous), the device graph and its weights (from --model-dir, the
// cache, or streamed), then steps. While it works on a request the worker sends heartbeats (see
// remote_messages.h), from the moment a load arrives until it is done, streaming included. Whatever ends a session — a Bye, a dead coordinator, garbage, a failed step —
// the worker logs it and accepts the next.
#pragma once

#include "net/socket.h"
#include "parallel/gloo_group.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::device::remote {

struct WorkerOptions {
  net::HostPort listen{"127.0.0.1", 7070};
  int threads = 1;
  std::vector<uint8_t> key;   // empty: no authentication (loopback only, see check_listen)
  int idle_timeout_ms = 3600 * 1000;  // a session with no message for this long is dropped
  std::string model_dir;   // where to look for the coordinator's model file ("" : never)
  std::string cache_dir;   // where streamed shards are kept ("" : no cache)
  parallel::NetPoll net_poll = parallel::NetPoll::Auto;
  int load_delay_ms = 0;   // tests: a load this much slower (heartbeats must carry the coordinator through)
};

// Throws weft::Error("cli", ...) when listening beyond loopback without a key.
void check_listen(const WorkerOptions& opt);

class WorkerServer {
 public:
  explicit WorkerServer(WorkerOptions opt);
  uint16_t port() const { return listener_.port(); }
  // Serves sessions until stop() (checked between sessions) or max_sessions (< 0: forever).
  void serve(int max_sessions = -1);
  void stop() { stop_ = true; }

 private:
  void session(net::Socket& s);

  WorkerOptions opt_;
  net::Listener listener_;
  std::atomic<bool> stop_{false};
};

}  // namespace weft::device::remote
