// One request's view of a connection, given to httplib in place of its own socket stream. It reads
// at most the bytes the gate measured (the head and Content-Length), so no framing httplib
// misreads can take more, within a deadline for the whole body; it polls rather than select()s (no
// FD_SETSIZE limit) and, unlike httplib's stream, still writes to a client that has only shut its
// sending side.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace weft::serve {

using Clock = std::chrono::steady_clock;

class ConnectionStream : public httplib::Stream {
 public:
  // fd: non-blocking; io_timeout_ms bounds each wait to read or write.
  ConnectionStream(int fd, uint64_t read_budget, Clock::time_point read_deadline, int io_timeout_ms);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  // httplib 0.11 answers 500 to a socket numbered FD_SETSIZE or more (its select() limit), its
  // only use of this: the stream polls, so it names no socket. Handlers find it by connection_fd().
  socket_t socket() const override { return INVALID_SOCKET; }

  uint64_t unread() const { return budget_ + (end_ - pos_); }  // bytes of this request left unread

 private:
  int fd_;
  uint64_t budget_;  // bytes still to take from the socket
  Clock::time_point deadline_;
  int io_timeout_ms_;
  char buf_[4096];
  size_t pos_ = 0, end_ = 0;
};

// The connection the calling thread serves a request on (-1: none), for handlers: httplib 0.11
// gives them no handle on it.
int connection_fd();
class ConnectionScope {
 public:
  explicit ConnectionScope(int fd);
  ~ConnectionScope();
  ConnectionScope(const ConnectionScope&) = delete;
  ConnectionScope& operator=(const ConnectionScope&) = delete;
};

// "127.0.0.1" (or an IPv6 address) of a socket's peer; "" when it has none.
std::string peer_address(int fd);

}  // namespace weft::serve
