// A tiny key-value store over weft frames, run by the coordinator for one rendezvous: each rank
// publishes its transport address under a key and reads its peers' (what gloo::rendezvous needs).
// Lives only while the group connects; keys are small, gets wait (with a timeout) for the key.
#pragma once

#include "net/socket.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft::net {

class KvServer {
 public:
  explicit KvServer(const std::string& host);  // listens on an ephemeral port of host
  ~KvServer();
  uint16_t port() const { return listener_.port(); }

 private:
  void accept_loop();
  void serve(Socket s);

  Listener listener_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> kv_;
  std::thread acceptor_;
  std::vector<std::thread> clients_;
};

class KvClient {
 public:
  KvClient(const HostPort& server, int timeout_ms);
  void set(const std::string& key, const std::vector<char>& value);
  // Waits until the key is set (up to the timeout given here or at construction).
  std::vector<char> get(const std::string& key);
  std::vector<char> get(const std::string& key, int timeout_ms);

 private:
  std::mutex mu_;  // one request at a time on the connection
  Socket s_;
  int timeout_ms_;
};

}  // namespace weft::net
