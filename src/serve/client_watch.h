// Notices a client that went away while its request waits for the model, so its slot is freed
// instead of generating for nobody. httplib 0.11 gives a handler no handle on its connection, so
// the watch finds the connection's socket by its two addresses (the ones the Request carries).
#pragma once

#include <string>

namespace weft::serve {

class ClientWatch {
 public:
  ClientWatch(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  // True once the client has closed or reset the connection. A socket that cannot be found
  // (should not happen) is never reported gone.
  bool gone() const;

 private:
  int fd_ = -1;  // not owned: the server's connection socket, open while the handler runs
};

}  // namespace weft::serve
