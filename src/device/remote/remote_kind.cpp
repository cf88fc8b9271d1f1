#include "device/remote/remote_kind.h"

#include "core/error.h"
#include "device/remote/remote_device.h"

namespace weft::device::remote {
namespace {

constexpr std::string_view kPrefix = "tcp://";

DeviceSpec parse_remote(const std::string& entry) {
  DeviceSpec s;
  s.kind = DeviceSpec::Kind::Remote;
  s.address = entry.substr(kPrefix.size());
  if (s.address.find(':') == std::string::npos) fail("cli", "--devices: '{}' needs host:port", entry);
  return s;
}

}  // namespace

DeviceKind remote_kind() {
  return {.kind = DeviceSpec::Kind::Remote,
          .prefix = kPrefix,
          .syntax = "tcp://HOST:PORT",
          .local = false,
          .parse = parse_remote,
          .describe = [](const DeviceSpec& s) { return std::string(kPrefix) + s.address; },
          .host_threads = [](const DeviceSpec&) { return 0; },  // it computes in its worker's process
          // The worker's threads where discovery announced them, else 1 (-ts or -ts auto know better).
          .default_ratio = [](const DeviceSpec& s) { return static_cast<double>(s.threads); },
          .create = [](const DeviceSpec& s, CreateContext&) -> std::unique_ptr<Device> {
            return std::make_unique<RemoteDevice>(s.address, s.threads, coordinator_key());
          },
          // Unknown without a session: a worker says it when a session opens (DeviceInfo, protocol
          // 9.2; RemoteDevice::memory), LAN announcements only what is available.
          .memory = [](const DeviceSpec&) { return DeviceMemory{}; },
          .list_local =
              [] {
                return std::string(
                    "tcp: nothing local; a worker (weft worker on any machine) is named by its address, "
                    "tcp://HOST:PORT, or found with --devices auto\n");
              }};
}

}  // namespace weft::device::remote
