#include "device/device_kind.h"

#include "core/error.h"
#include "device/cpu/cpu_kind.h"
#include "device/remote/remote_kind.h"
#include "device/vulkan/vk_kind.h"

#include <charconv>

namespace weft::device {

const std::vector<DeviceKind>& device_kinds() {
  static const std::vector<DeviceKind> kinds = {cpu_kind(), vk::vulkan_kind(), remote::remote_kind()};
  return kinds;
}

const DeviceKind& device_kind(DeviceSpec::Kind kind) {
  for (const auto& k : device_kinds())
    if (k.kind == kind) return k;
  fail("device", "device kind {} is not in this build", static_cast<int>(kind));
}

int parse_spec_int(std::string_view s, const std::string& entry, int lo, int hi) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    fail("cli", "--devices: '{}': '{}' is not a number in {}..{}", entry, s, lo, hi);
  return v;
}

}  // namespace weft::device
