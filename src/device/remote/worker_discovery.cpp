#include "device/remote/worker_discovery.h"

#include "core/error.h"
#include "net/channel.h"
#include "net/handshake.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

namespace weft::device::remote {

void probe_worker(const std::string& address, const std::vector<uint8_t>& key, int timeout_ms) {
  const std::string name = "tcp://" + address;
  net::Channel ch;
  try {
    net::Connected c = net::connect_worker(net::parse_host_port(address), key, timeout_ms, timeout_ms);
    ch = net::Channel(std::move(c.socket), std::move(c.mac));
    ch.send(net::MsgType::Bye, {}, timeout_ms);
  } catch (const Error& e) {
    throw e.on_device(name);
  }
  // The worker frees its session slot before it closes the connection: once it has closed, the
  // session the caller opens next is admitted. Until then it may still send what a session opens
  // with (DeviceInfo, heartbeats while it creates its device): read and dropped; an Error frame
  // (its device could not be created) fails the probe.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool closed = false;
  std::optional<Error> refused;
  try {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0 || !ch.socket().readable(static_cast<int>(left))) break;
      const net::Frame f = ch.recv(static_cast<int>(left), timeout_ms);
      if (f.type == net::MsgType::Error && !refused) refused = net::read_error_payload(f.payload, name);
    }
  } catch (const Error&) {
    closed = true;
  }
  if (refused) throw *refused;
  if (!closed) fail_on("net", name, "the worker did not end the probe's session within {} ms", timeout_ms);
}

namespace {
std::string describe_found(const net::FoundWorker& w) {
  const net::Announcement& a = w.announced;
  return fmt::format("tcp://{} ({}, {} thread{}, {} MiB available, protocol {}.{})", w.address(), a.name, a.threads,
                     a.threads == 1 ? "" : "s", a.memory_bytes >> 20, a.version.major, a.version.minor);
}
}  // namespace

DiscoveredWorkers discover_workers(const net::DiscoveryOptions& opt, int timeout_ms, const std::vector<uint8_t>& key) {
  DiscoveredWorkers out;
  for (const net::FoundWorker& w : net::discover(opt, timeout_ms)) {
    const std::string what = describe_found(w);
    if (w.announced.version.major != net::kProtocolMajor) {
      out.left_out.push_back(fmt::format("{}: speaks protocol {}, this coordinator {}", what, w.announced.version.major,
                                         net::kProtocolMajor));
      continue;
    }
    try {
      probe_worker(w.address(), key);
    } catch (const Error& e) {
      out.left_out.push_back(fmt::format("{}: {}", what, e.message()));
      continue;
    }
    DeviceSpec s;
    s.kind = DeviceSpec::Kind::Remote;
    s.threads = static_cast<int>(w.announced.threads);
    s.address = w.address();
    out.workers.push_back(std::move(s));
    out.found.push_back(what);
  }
  return out;
}

}  // namespace weft::device::remote
