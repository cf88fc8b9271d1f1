#include "serve/client_watch.h"

#include <poll.h>
#include <sys/socket.h>

#include <string_view>

namespace weft::serve {

bool ClientWatch::gone(bool response_started) {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR)) return true;  // reset
  if (!(p.revents & POLLRDHUP)) return false;        // a next request's bytes raise only POLLIN
  if (response_started) return false;
  if (!probe_) return true;
  if (!probed_) {
    probed_ = true;
    constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    if (send(fd_, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return true;
  }
  return false;  // half-closed, or the reset is on its way (the next look sees it)
}

}  // namespace weft::serve
