// Finding workers on the local segment without configuration. A worker (`weft worker --announce`)
// runs an Announcer: it announces itself to the discovery address when it starts and every
// kReannounceMs after, and answers each query at once, by unicast to the asker, so a coordinator
// that starts later need not wait for the next round. A coordinator (`--devices auto`) sends a
// query and collects the announcements that arrive within its timeout (discover()).
//
// The discovery address is a multicast group (the default: sent on every interface that is up,
// loopback included, with TTL 1 so it stays on the segment) or a broadcast address such as
// 127.255.255.255 or 10.0.0.255 (--discover-addr). Workers of one host share the port
// (SO_REUSEPORT), and multicast and broadcast datagrams reach each of them.
#pragma once

#include "net/announcement.h"
#include "net/socket.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace weft::net {

// An administratively scoped group (RFC 2365: stays in the organisation) and a port of its own.
inline constexpr const char* kDefaultDiscoveryAddress = "239.255.87.70:7079";
inline constexpr int kReannounceMs = 10000;

struct DiscoveryOptions {
  HostPort address;       // a multicast group or a broadcast address, with the port
  std::string interface;  // IPv4 address of the one interface to use ("" : every interface that is up)
};

class Announcer {
 public:
  // Binds the discovery port and starts announcing `self`. A worker listening on loopback only
  // (loopback_only) answers only queries from loopback: its address means nothing elsewhere.
  // Throws weft::Error("net", ...) when the socket cannot be set up.
  Announcer(DiscoveryOptions opt, Announcement self, bool loopback_only);
  ~Announcer();
  Announcer(const Announcer&) = delete;
  Announcer& operator=(const Announcer&) = delete;

 private:
  void run();

  DiscoveryOptions opt_;
  std::vector<uint8_t> announcement_;
  bool loopback_only_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct FoundWorker {
  std::string host;  // the announcement's source address
  Announcement announced;
  std::string address() const { return host + ":" + std::to_string(announced.port); }
};

// Queries the discovery address and returns the workers that answered within timeout_ms, each
// once, in order of arrival (any protocol version). Malformed datagrams are skipped and counted in
// `malformed` when given. Throws weft::Error("net", ...) when the socket cannot be set up.
std::vector<FoundWorker> discover(const DiscoveryOptions& opt, int timeout_ms, int* malformed = nullptr);

}  // namespace weft::net
