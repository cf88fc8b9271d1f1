#include "serve/client_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace weft::serve {

namespace {
// "127.0.0.1" and port of a socket's address (IPv4 or IPv6), as httplib renders them.
bool address_of(const sockaddr_storage& a, std::string& host, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &in.sin_addr, buf, sizeof buf);
    port = ntohs(in.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof buf);
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  host = buf;
  return true;
}

bool matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string host;
  int port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !address_of(a, host, port) || port != local_port ||
      host != local_addr)
    return false;
  len = sizeof a;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && address_of(a, host, port) &&
         port == remote_port && host == remote_addr;
}
}  // namespace

ClientWatch::ClientWatch(const std::string& local_addr, int local_port, const std::string& remote_addr,
                         int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2 && fd != dirfd(dir) && matches(fd, local_addr, local_port, remote_addr, remote_port)) {
      fd_ = fd;
      break;
    }
  }
  closedir(dir);
}

bool ClientWatch::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  // POLLRDHUP: the client shut its side (closed); POLLHUP / POLLERR: reset. Bytes of a next
  // request on the same connection raise only POLLIN.
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace weft::serve
