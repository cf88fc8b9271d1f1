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
  return {DeviceSpec::Kind::Remote,
          kPrefix,
          "tcp://HOST:PORT",
          parse_remote,
          [](const DeviceSpec& s) { return std::string(kPrefix) + s.address; },
          [](const DeviceSpec&) { return 0; },  // it computes in its worker's process
          [](const DeviceSpec& s, CreateContext&) -> std::unique_ptr<Device> {
            return std::make_unique<RemoteDevice>(s.address, s.threads, coordinator_key());
          },
          [] {
            return std::string(
                "tcp: nothing local; a worker (weft worker on any machine) is named by its address, "
                "tcp://HOST:PORT, or found with --devices auto\n");
          }};
}

}  // namespace weft::device::remote
