// Notices a client that went away while its request waits for the model, so its slot is freed
// instead of generating for nobody. A client that has only shut its sending side (it waits for
// the reply) looks the same as one that closed, until something is sent: so the watch then sends
// an interim "100 Continue", which HTTP/1.1 clients skip, and a closed client's host answers
// with a reset.
#pragma once

namespace weft::serve {

class ClientWatch {
 public:
  // fd: the request's connection (connection_fd()); -1: never reported gone. probe: the client
  // speaks HTTP/1.1 (an HTTP/1.0 one may not be sent a 1xx: its shut side counts as gone).
  ClientWatch(int fd, bool probe) : fd_(fd), probe_(probe) {}
  // True once the client has reset the connection, or closed it where no probe can tell.
  // response_started: bytes of the reply went out, which a probe may no longer precede (a failed
  // write tells then).
  bool gone(bool response_started);

 private:
  int fd_;  // not owned: the connection, open while the handler runs
  bool probe_, probed_ = false;
};

}  // namespace weft::serve
