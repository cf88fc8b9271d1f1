// The worker side of `weft worker`: serves one coordinator at a time. A session is: handshake,
// the device it serves (DeviceInfo, to a coordinator of protocol 9.2 or later), optional group
// setup (Gloo rendezvous), the device graph and its weights (from --model-dir, the cache, or
// streamed), then steps. While it works on a request the worker sends heartbeats (see
// remote_messages.h), from the moment a load arrives until it is done, streaming included.
// Whatever ends a session — a Bye, a dead coordinator, garbage, a failed step — the worker logs it
// and accepts the next.
//
// Against idle or hostile connections: every connection gets a thread of its own for its
// handshake (at most max_handshakes at once, and max_handshakes_per_host from one address, so that
// one host's idle connections cannot take every place; beyond that a connection is answered
// "busy" at once, net::refuse_busy, and its coordinator tries again), which must finish within
// handshake_timeout_ms. The session slot is taken only by a coordinator that has completed the
// handshake (authenticated, with a key); while it is held, another such coordinator is told
// "worker busy: serving a session from tcp://HOST:PORT since N s". A session that has not sent its
// Load within preload_timeout_ms of the handshake is dropped; after the load the idle bound is
// long, since a loaded chat session may legitimately wait for its user.
#pragma once

#include "device/device_spec.h"
#include "device/remote/model_store.h"
#include "net/channel.h"
#include "net/handshake.h"
#include "net/socket.h"
#include "parallel/gloo_group.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace weft::device::remote {

struct WorkerOptions {
  net::HostPort listen{"127.0.0.1", 7070};
  int threads = 1;                                   // -t: the default device is cpu:<threads>
  std::optional<DeviceSpec> device;                  // --devices: the local device to serve instead (see serve_device)
  std::vector<uint8_t> key;                          // empty: no authentication (loopback only, see check_listen)
  int idle_timeout_ms = 3600 * 1000;                 // a loaded session with no message for this long is dropped
  int preload_timeout_ms = 60 * 1000;                // from the handshake to the Load message (--preload-timeout)
  int handshake_timeout_ms = 3000;                   // the whole handshake, from accept to Welcome
  int max_handshakes = 64;                           // connections in their handshake at once; more are told "busy"
  int max_handshakes_per_host = 8;                   // of them, from one address
  std::string model_dir;                             // where to look for the coordinator's model file ("" : never)
  std::string cache_dir;                             // where streamed shards are kept ("" : no cache)
  uint64_t cache_max_bytes = kDefaultCacheMaxBytes;  // their total size at most (least recently used go first)
  parallel::NetPoll net_poll = parallel::NetPoll::Auto;
  // --memory-limit: at most this many bytes of weights and KV cache on the served device (0: its
  // own memory). A hard limit: coordinators of protocol 9.2 fit their split under it (DeviceInfo),
  // and a load past it is refused.
  uint64_t memory_limit_bytes = 0;
  int load_delay_ms = 0;  // tests: a load this much slower (heartbeats must carry the coordinator through)
};

// Throws weft::Error("cli", ...) when listening beyond loopback without a key.
void check_listen(const WorkerOptions& opt);
// `weft worker --devices`: one entry of a kind that computes on this machine; sets opt.device and
// opt.threads (its threads, for announcements and waiting in all-reduces). Throws naming the entry.
void serve_device(WorkerOptions& opt, const std::string& list);
// The device a session runs: opt.device, else cpu:<opt.threads>.
DeviceSpec served_device(const WorkerOptions& opt);
// What the worker says its device holds (DeviceInfo): the device's memory under opt.memory_limit_bytes.
DeviceMemory served_memory(const WorkerOptions& opt, const DeviceMemory& device);

class WorkerServer {
 public:
  explicit WorkerServer(WorkerOptions opt);
  uint16_t port() const { return listener_.port(); }
  // Serves sessions until stop() or max_sessions sessions (< 0: forever) have been admitted; then
  // waits for the running session and handshakes to end.
  void serve(int max_sessions = -1);
  void stop() { stop_ = true; }

 private:
  using Clock = std::chrono::steady_clock;
  // One accepted connection, on its own thread: the handshake, then the session if admitted.
  void connection(net::Socket s);
  // Takes the session slot for peer; returns "" or why not (busy, shutting down).
  std::string admit(const std::string& peer, bool& took);
  // A session with a coordinator of that protocol version (which says whether it opens with DeviceInfo).
  void session(net::Channel& ch);

  WorkerOptions opt_;
  net::Listener listener_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;                  // a connection thread ended
  int threads_ = 0, handshakes_ = 0;            // connection threads alive; of them, in their handshake
  std::map<std::string, int> handshakes_from_;  // handshakes by peer address (entries > 0 only)
  int admitted_ = 0, max_sessions_ = -1;
  std::string holder_;  // the peer holding the session slot ("" : free)
  Clock::time_point held_since_;
};

}  // namespace weft::device::remote
