// Blocking TCP sockets where every wait has a timeout (poll()), so a silent peer becomes a
// weft::Error("net", ...) naming it instead of a hang. A closed or reset peer is reported at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace weft::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string str() const;
};
// "HOST:PORT" (port 0..65535; host non-empty). Throws weft::Error("net", ...) naming the text.
HostPort parse_host_port(const std::string& text);
bool is_loopback(const std::string& host);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  ~Socket();
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }  // "tcp://host:port", for messages
  void close();

  // Sends all bytes; throws if the peer is gone or the send does not progress in timeout_ms.
  void send_all(const void* data, size_t n, int timeout_ms);
  // The same for several buffers in order, in as few system calls as they need (no concatenation).
  void send_all(std::span<const std::span<const uint8_t>> parts, int timeout_ms);
  // Receives exactly n bytes within timeout_ms (whole transfer); throws on timeout or EOF.
  void recv_exact(void* data, size_t n, int timeout_ms);
  // Whether data (or EOF) is ready within timeout_ms.
  bool readable(int timeout_ms);
  // Copies up to n buffered bytes without consuming them or waiting: returns the count (0: none
  // yet); throws when the peer has closed or reset the connection.
  size_t peek(void* data, size_t n);
  // The local address of this connection (the interface that reaches the peer).
  std::string local_host() const;

 private:
  int fd_ = -1;
  std::string peer_;
};

Socket connect_tcp(const HostPort& hp, int timeout_ms);

class Listener {
 public:
  explicit Listener(const HostPort& hp);  // port 0: an ephemeral port (see port())
  ~Listener();
  uint16_t port() const { return port_; }
  // Waits up to timeout_ms for a connection; returns an invalid Socket on timeout.
  Socket accept(int timeout_ms);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace weft::net
