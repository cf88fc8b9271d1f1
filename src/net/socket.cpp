#include "net/socket.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <utility>

namespace weft::net {
namespace {

using Clock = std::chrono::steady_clock;
// Connections waiting for accept(): a burst of idle or hostile ones must not fill the queue before
// the worker's accept loop (which hands each to a thread at once) gets to the real coordinator.
constexpr int kListenBacklog = 128;

int ms_left(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d < 0 ? 0 : static_cast<int>(d);
}

// Waits for `events` on fd until deadline; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) fail("net", "poll: {}", std::strerror(errno));
  }
}

sockaddr_in resolve(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(hp.host.c_str(), nullptr, &hints, &res); e != 0 || !res)
    fail("net", "cannot resolve '{}': {}", hp.host, gai_strerror(e));
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(hp.port);
  return a;
}

}  // namespace

std::string HostPort::str() const { return host + ":" + std::to_string(port); }

HostPort parse_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) fail("net", "'{}' is not HOST:PORT", text);
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
    fail("net", "'{}': bad port '{}'", text, port);
  return {text.substr(0, colon), static_cast<uint16_t>(std::stoi(port))};
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

Socket::~Socket() { close(); }
Socket::Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)), peer_(std::move(o.peer_)) {}
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    peer_ = std::move(o.peer_);
  }
  return *this;
}
void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::send_all(const void* data, size_t n, int timeout_ms) {
  const std::span<const uint8_t> one(static_cast<const uint8_t*>(data), n);
  send_all(std::span(&one, 1), timeout_ms);
}

void Socket::send_all(std::span<const std::span<const uint8_t>> parts, int timeout_ms) {
  if (fd_ < 0) fail_on("net", peer_, "send on a closed connection");
  constexpr size_t kMaxIov = 64;  // well under IOV_MAX; more parts go in further calls
  std::array<iovec, kMaxIov> iov;
  size_t next = 0, at = 0;  // parts[next] is sent up to byte `at`
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (next < parts.size()) {
    size_t n = 0;
    for (size_t i = next; i < parts.size() && n < kMaxIov; ++i) {
      const size_t skip = i == next ? at : 0;
      if (parts[i].size() == skip) continue;
      iov[n++] = {const_cast<uint8_t*>(parts[i].data()) + skip, parts[i].size() - skip};
    }
    if (n == 0) break;
    msghdr m{};
    m.msg_iov = iov.data();
    m.msg_iovlen = n;
    ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);  // the bound is on progress
      for (; r > 0 && next < parts.size(); ++next, at = 0) {
        const size_t left = parts[next].size() - at;
        if (static_cast<size_t>(r) < left) {
          at += static_cast<size_t>(r);
          break;
        }
        r -= static_cast<ssize_t>(left);
      }
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_fd(fd_, POLLOUT, deadline)) fail_on("net", peer_, "send timed out after {} ms", timeout_ms);
      continue;
    }
    fail_on("net", peer_, "connection lost while sending ({})", std::strerror(errno));
  }
}

void Socket::recv_exact(void* data, size_t n, int timeout_ms) {
  if (fd_ < 0) fail_on("net", peer_, "receive on a closed connection");
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if (!wait_fd(fd_, POLLIN, deadline)) fail_on("net", peer_, "no reply within {} ms", timeout_ms);
    const ssize_t r = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      fail_on("net", peer_, "connection closed by peer");
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      fail_on("net", peer_, "connection lost ({})", std::strerror(errno));
    }
  }
}

bool Socket::readable(int timeout_ms) {
  return fd_ >= 0 && wait_fd(fd_, POLLIN, Clock::now() + std::chrono::milliseconds(timeout_ms));
}

size_t Socket::peek(void* data, size_t n) {
  if (fd_ < 0) fail_on("net", peer_, "peek on a closed connection");
  for (;;) {
    const ssize_t r = ::recv(fd_, data, n, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0) return static_cast<size_t>(r);
    if (r == 0) fail_on("net", peer_, "connection closed by peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno != EINTR) fail_on("net", peer_, "connection lost ({})", std::strerror(errno));
  }
}

std::string Socket::local_host() const {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    fail("net", "getsockname: {}", std::strerror(errno));
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return buf;
}

Socket connect_tcp(const HostPort& hp, int timeout_ms) {
  const std::string name = "tcp://" + hp.str();
  sockaddr_in a = resolve(hp);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) fail("net", "socket: {}", std::strerror(errno));
  Socket s(fd, name);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (errno != EINPROGRESS) fail_on("net", name, "cannot connect ({})", std::strerror(errno));
    if (!wait_fd(fd, POLLOUT, Clock::now() + std::chrono::milliseconds(timeout_ms)))
      fail_on("net", name, "connect timed out after {} ms", timeout_ms);
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) fail_on("net", name, "cannot connect ({})", std::strerror(err));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // steps are small request/replies
  return s;
}

Listener::Listener(const HostPort& hp) {
  sockaddr_in a = resolve(hp);
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("net", "socket: {}", std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, kListenBacklog) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    fail("net", "cannot listen on {}: {}", hp.str(), std::strerror(e));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

Socket Listener::accept(int timeout_ms) {
  if (!wait_fd(fd_, POLLIN, Clock::now() + std::chrono::milliseconds(timeout_ms))) return {};
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return {};
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return Socket(fd, "tcp://" + std::string(buf) + ":" + std::to_string(ntohs(a.sin_port)));
}

}  // namespace weft::net
