#include "net/discovery.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace weft::net {
namespace {

using Clock = std::chrono::steady_clock;
// How often the announcer looks at its stop flag, and a coordinator repeats its query (a lost
// datagram costs one round, not the whole timeout).
constexpr int kReceivePollMs = 200;
constexpr int kQueryRepeatMs = 250;

in_addr ipv4(const std::string& host, const char* what) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) fail("net", "{}: '{}' is not an IPv4 address", what, host);
  return a;
}

bool is_multicast(const in_addr& a) { return IN_MULTICAST(ntohl(a.s_addr)); }

sockaddr_in endpoint(const in_addr& a, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = a;
  sa.sin_port = htons(port);
  return sa;
}

// The IPv4 addresses of the interfaces to use: the one asked for, or every one that is up and
// can carry multicast (loopback too: workers on this host).
std::vector<in_addr> interfaces(const std::string& only) {
  if (!only.empty()) return {ipv4(only, "--discover-iface")};
  std::vector<in_addr> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) fail("net", "discovery: getifaddrs: {}", std::strerror(errno));
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (!(i->ifa_flags & (IFF_MULTICAST | IFF_LOOPBACK))) continue;
    out.push_back(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr);
  }
  ::freeifaddrs(list);
  return out;
}

class UdpSocket {
 public:
  UdpSocket() : fd_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) fail("net", "discovery: socket: {}", std::strerror(errno));
  }
  ~UdpSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  int release() { return std::exchange(fd_, -1); }
  int fd() const { return fd_; }

  void option(int level, int name, const void* v, socklen_t n, const char* what) {
    if (::setsockopt(fd_, level, name, v, n) != 0) fail("net", "discovery: {}: {}", what, std::strerror(errno));
  }
  void bind_port(uint16_t port) {
    const int one = 1;
    option(SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one), "SO_REUSEADDR");
    option(SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one), "SO_REUSEPORT");  // every worker of this host
    const sockaddr_in sa = endpoint(in_addr{htonl(INADDR_ANY)}, port);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0)
      fail("net", "discovery: bind to port {}: {}", port, std::strerror(errno));
  }
  // Sets up sending to `to` (and, for a group, receiving from it on ifaces when join).
  void prepare(const in_addr& to, const std::vector<in_addr>& ifaces, bool join) {
    if (!is_multicast(to)) {
      const int one = 1;
      option(SOL_SOCKET, SO_BROADCAST, &one, sizeof(one), "SO_BROADCAST");
      return;
    }
    const unsigned char ttl = 1, loop = 1;  // this segment only; workers of this host hear it too
    option(IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl), "IP_MULTICAST_TTL");
    option(IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop), "IP_MULTICAST_LOOP");
    if (!join) return;
    int joined = 0;
    for (const in_addr& i : ifaces) {
      ip_mreq m{to, i};
      joined += ::setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)) == 0;
    }
    if (joined == 0) fail("net", "discovery: could not join the multicast group on any interface");
  }
  // Sends to `to`: a group once on each interface, a broadcast or unicast address once.
  void send(const std::vector<uint8_t>& bytes, const sockaddr_in& to, const std::vector<in_addr>& ifaces) {
    if (!is_multicast(to.sin_addr)) {
      send_one(bytes, to);
      return;
    }
    for (const in_addr& i : ifaces)
      if (::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &i, sizeof(i)) == 0) send_one(bytes, to);
  }
  void send_one(const std::vector<uint8_t>& bytes, const sockaddr_in& to) {
    // A datagram is best effort: an interface that refuses it is one the workers are not behind.
    (void)::sendto(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
  }

 private:
  int fd_;
};

// One datagram on fd within timeout_ms (its size; 0: none), its sender in `from`.
size_t receive(int fd, uint8_t* buf, size_t cap, sockaddr_in& from, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return 0;
  socklen_t n = sizeof(from);
  const ssize_t got = ::recvfrom(fd, buf, cap, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &n);
  return got > 0 ? static_cast<size_t>(got) : 0;
}

// Room for one more byte than a valid datagram may have, so an oversized one is seen as such.
constexpr size_t kReceiveBytes = kMaxDiscoveryDatagramBytes + 1;

}  // namespace

Announcer::Announcer(DiscoveryOptions opt, Announcement self, bool loopback_only)
    : opt_(std::move(opt)), announcement_(encode_announcement(self)), loopback_only_(loopback_only) {
  UdpSocket s;
  s.bind_port(opt_.address.port);
  s.prepare(ipv4(opt_.address.host, "--discover-addr"), interfaces(opt_.interface), true);
  fd_ = s.release();
  thread_ = std::thread([this] { run(); });
}

Announcer::~Announcer() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void Announcer::run() {
  UdpSocket s;  // sends from a port of its own, so replies never come back to the shared port
  const in_addr group = ipv4(opt_.address.host, "--discover-addr");
  s.prepare(group, {}, false);
  const sockaddr_in to = endpoint(group, opt_.address.port);
  const std::vector<in_addr> ifaces = interfaces(opt_.interface);
  auto next_announce = Clock::now();
  uint8_t buf[kReceiveBytes];
  while (!stop_) {
    if (Clock::now() >= next_announce) {
      s.send(announcement_, to, ifaces);
      next_announce = Clock::now() + std::chrono::milliseconds(kReannounceMs);
    }
    sockaddr_in from{};
    const size_t got = receive(fd_, buf, sizeof(buf), from, kReceivePollMs);
    if (got == 0) continue;
    if (loopback_only_ && (ntohl(from.sin_addr.s_addr) >> 24) != 127) continue;
    try {
      // Strangers' bytes: anything but a well-formed query is dropped without a word (a flood
      // of garbage must not fill the worker's log).
      if (!decode_discovery({buf, got})) s.send_one(announcement_, from);
    } catch (const Error&) {
    }
  }
}

std::vector<FoundWorker> discover(const DiscoveryOptions& opt, int timeout_ms, int* malformed) {
  UdpSocket s;
  const in_addr to_addr = ipv4(opt.address.host, "--discover-addr");
  s.prepare(to_addr, {}, false);
  const std::vector<in_addr> ifaces = interfaces(opt.interface);
  const sockaddr_in to = endpoint(to_addr, opt.address.port);
  const std::vector<uint8_t> query = encode_query();
  std::vector<FoundWorker> found;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto next_query = Clock::now();
  uint8_t buf[kReceiveBytes];
  for (auto now = Clock::now(); now < deadline; now = Clock::now()) {
    if (now >= next_query) {
      s.send(query, to, ifaces);
      next_query = now + std::chrono::milliseconds(kQueryRepeatMs);
    }
    const auto wait = std::min(deadline, next_query) - now;
    const int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) + 1;
    sockaddr_in from{};
    const size_t n = receive(s.fd(), buf, sizeof(buf), from, wait_ms);
    if (n == 0) continue;
    try {
      const std::optional<Announcement> a = decode_discovery({buf, n});
      if (!a) continue;  // a query (ours, looped back, or another coordinator's)
      char host[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &from.sin_addr, host, sizeof(host));
      FoundWorker w{host, *a};
      const bool seen =
          std::any_of(found.begin(), found.end(), [&](const FoundWorker& f) { return f.address() == w.address(); });
      if (!seen) found.push_back(std::move(w));
    } catch (const Error&) {
      if (malformed) ++*malformed;
    }
  }
  return found;
}

}  // namespace weft::net
