// Where every connection waits, on one thread, until its next request's head (and a small body)
// has arrived; only then does a worker thread take it. httplib 0.11 gives each connection a thread
// for its whole life and waits 5 s per read with no deadline for the whole head, so clients that
// send a byte a second held every thread; here a waiting connection costs a file descriptor, the
// head has a deadline, and each client address holds a bounded number of waiting connections (a
// new one pushes out that address's oldest: a slow client loses to a prompt one).
// The bytes are peeked, not read: the worker's httplib reads them again.
#pragma once

#include "serve/request_head.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace weft::serve {

using Clock = std::chrono::steady_clock;

struct GateOptions {
  HeadPolicy policy;
  int idle_timeout_ms = 5000;    // for a request's first byte (httplib's keep-alive wait)
  int head_timeout_ms = 10000;   // from that byte, for the whole head (and small body)
  size_t max_per_address = 128;  // waiting connections of one client address
  size_t max_waiting = 4096;     // of all addresses together
  int linger_ms = 2000;          // a closing connection's wait for the client's end
};

// Bodies up to this size are waited for here too, so a worker never waits on a slow small body;
// a peek this large fits in a socket's default receive window (64 KiB).
constexpr size_t kGateBodyBytes = 32 << 10;

class RequestGate {
 public:
  // Takes a connection whose head arrived and passed check_head(); the callee owns the fd then.
  using Handoff = std::function<void(int fd, const Head& head)>;
  using Refused = std::function<void(int status)>;  // for the request counts

  RequestGate(GateOptions opt, Handoff handoff, Refused refused);
  ~RequestGate();  // stop()
  RequestGate(const RequestGate&) = delete;
  RequestGate& operator=(const RequestGate&) = delete;

  // Any thread. A new connection; made non-blocking.
  void admit(int fd) { post(fd, Phase::Idle); }
  // A connection back from its request, to wait for the next (keep-alive).
  void resume(int fd) { post(fd, Phase::Idle); }
  // Closes after sending FIN and reading what the client still sends for a moment, so a client
  // still sending reads the reply rather than a reset.
  void linger(int fd) { post(fd, Phase::Linger); }
  // From now on a request is refused (503) and idle connections close: the server is stopping.
  void drain();
  // Closes every connection it holds; later ones are closed at once.
  void stop();
  size_t waiting() const { return n_waiting_; }  // connections waiting for a head

 private:
  enum class Phase { Idle, Head, Linger };
  struct Conn {
    std::string addr;
    Phase phase = Phase::Idle;
    uint64_t seq = 0;  // order of arrival, for pushing out the oldest
    Clock::time_point deadline;
  };

  void post(int fd, Phase phase);
  void loop();
  void take_inbox();
  void add(int fd, Phase phase);
  void on_ready(int fd, uint32_t events);
  void look_at_head(int fd, Conn& c, bool peer_done);
  void refuse(int fd, int status, const std::string& message);
  void start_linger(int fd, Conn& c);
  void drain_input(int fd);
  void sweep();
  void unwait(int fd, Conn& c);  // out of the waiting sets
  void close_conn(int fd);

  const GateOptions opt_;
  const Handoff handoff_;
  const Refused refused_;
  int epoll_fd_ = -1, wake_fd_ = -1;
  std::mutex mu_;
  std::vector<std::pair<int, Phase>> inbox_;  // guarded by mu_
  bool stopped_ = false;                      // guarded by mu_
  std::atomic<bool> draining_{false};
  std::atomic<size_t> n_waiting_{0};
  // The loop thread's own:
  std::unordered_map<int, Conn> conns_;
  std::map<uint64_t, int> waiting_;                              // seq -> fd
  std::unordered_map<std::string, std::set<uint64_t>> by_addr_;  // address -> seqs waiting
  size_t n_linger_ = 0;
  uint64_t next_seq_ = 0;
  std::vector<char> peek_;
  std::thread thread_;
};

}  // namespace weft::serve
