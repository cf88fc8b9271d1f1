// The coordinator's side of finding workers: whether a worker answers a handshake (probe_worker:
// used to admit discovered workers and to let lost ones rejoin), and `--devices auto`: the workers
// that announce themselves on the segment (net/discovery.h), kept only when they speak this
// protocol major and pass the handshake with our key.
#pragma once

#include "device/device_spec.h"
#include "net/discovery.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::device::remote {

inline constexpr int kProbeTimeoutMs = 1000;

// Connects to the worker at address (HOST:PORT), runs the handshake with key and ends the session
// at once, waiting (within timeout_ms) until the worker has closed it, so that a session opened
// next finds it free. Throws weft::Error naming tcp://address when it does not answer or refuses.
void probe_worker(const std::string& address, const std::vector<uint8_t>& key, int timeout_ms = kProbeTimeoutMs);

struct DiscoveredWorkers {
  std::vector<DeviceSpec> workers;    // the ones to use, in order of answer
  std::vector<std::string> found;     // one line per worker kept: where, host name, threads, memory
  std::vector<std::string> left_out;  // one line per worker left out, saying why
};
// Queries the segment for timeout_ms, then probes each worker that answered.
DiscoveredWorkers discover_workers(const net::DiscoveryOptions& opt, int timeout_ms, const std::vector<uint8_t>& key);

}  // namespace weft::device::remote
