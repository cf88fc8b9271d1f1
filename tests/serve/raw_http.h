// Test helper: HTTP spoken by hand over a loopback socket, for what a well-behaved client never
// sends (chunked oversize bodies, slow heads, half-closes). Every read is bounded by a timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

namespace weft::serve::test_support {

class RawClient {
 public:
  explicit RawClient(int port, int timeout_ms = 5000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // False once the server has closed or reset the connection (or the send timed out).
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void shut_wr() { ::shutdown(fd_, SHUT_WR); }
  // Everything until the server closes, or what came before the timeout.
  std::string read_all() {
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  // True when the server closed (or reset: it had not read what was sent) within the timeout.
  bool closed_by_server() {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The status of the first final response in `reply` (interim 1xx ones skipped); 0 if none.
inline int status_of(std::string_view reply) {
  for (size_t at = 0; reply.substr(at).starts_with("HTTP/1.1 ");) {
    const int status = std::atoi(std::string(reply.substr(at + 9, 3)).c_str());
    if (status >= 200) return status;
    const size_t end = reply.find("\r\n\r\n", at);
    if (end == std::string_view::npos) return 0;
    at = end + 4;
  }
  return 0;
}

// The body after the first final response's head.
inline std::string body_of(std::string_view reply) {
  size_t at = 0;
  while (reply.substr(at).starts_with("HTTP/1.1 1")) at = reply.find("\r\n\r\n", at) + 4;
  const size_t end = reply.find("\r\n\r\n", at);
  return end == std::string_view::npos ? "" : std::string(reply.substr(end + 4));
}

}  // namespace weft::serve::test_support
