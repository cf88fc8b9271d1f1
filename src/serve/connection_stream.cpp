#include "serve/connection_stream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::serve {

namespace {

thread_local int current_fd = -1;

// Waits for `events` up to timeout_ms (and the deadline, when given). True when ready.
bool wait_for(int fd, short events, int timeout_ms, Clock::time_point deadline = Clock::time_point::max()) {
  if (deadline != Clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, timeout_ms));
  }
  pollfd p{fd, events, 0};
  int n;
  while ((n = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  return n > 0;
}

bool address_of(const sockaddr_storage& a, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  ip = host;
  port = std::atoi(serv);
  return true;
}

}  // namespace

ConnectionStream::ConnectionStream(int fd, uint64_t read_budget, Clock::time_point read_deadline, int io_timeout_ms)
    : fd_(fd), budget_(read_budget), deadline_(read_deadline), io_timeout_ms_(io_timeout_ms) {}

bool ConnectionStream::is_readable() const {
  return pos_ < end_ || (budget_ > 0 && wait_for(fd_, POLLIN, io_timeout_ms_, deadline_));
}

bool ConnectionStream::is_writable() const { return wait_for(fd_, POLLOUT, io_timeout_ms_); }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (pos_ == end_) {
    if (budget_ == 0) return 0;  // this request's bytes are all read: what follows is not its own
    if (!wait_for(fd_, POLLIN, io_timeout_ms_, deadline_)) return -1;
    const ssize_t n = ::recv(fd_, buf_, std::min<uint64_t>(sizeof buf_, budget_), MSG_DONTWAIT);
    if (n <= 0) return n == 0 || errno == EAGAIN ? 0 : -1;
    budget_ -= static_cast<uint64_t>(n);
    pos_ = 0, end_ = static_cast<size_t>(n);
  }
  const size_t n = std::min(size, end_ - pos_);
  std::memcpy(ptr, buf_ + pos_, n);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  for (;;) {
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if ((errno != EAGAIN && errno != EINTR) || !wait_for(fd_, POLLOUT, io_timeout_ms_)) return -1;
  }
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, len, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) address_of(a, len, ip, port);
}

int connection_fd() { return current_fd; }
ConnectionScope::ConnectionScope(int fd) { current_fd = fd; }
ConnectionScope::~ConnectionScope() { current_fd = -1; }

std::string peer_address(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string ip;
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !address_of(a, len, ip, port)) return "";
  return ip;
}

}  // namespace weft::serve
