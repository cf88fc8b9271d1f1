#include "device/device_spec.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/device_kind.h"

#include <fmt/format.h>

namespace weft::device {
namespace {

const DeviceKind& kind_of_entry(const std::string& entry) {
  for (const auto& k : device_kinds())
    if (entry.rfind(k.prefix, 0) == 0) return k;
  std::string expected;
  for (const auto& k : device_kinds()) expected += fmt::format("{}{}", expected.empty() ? "" : " or ", k.syntax);
  fail("cli", "--devices: unknown device '{}' (expected {})", entry, expected);
}

}  // namespace

std::vector<DeviceSpec> parse_devices(const std::string& list) {
  std::vector<DeviceSpec> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string entry = list.substr(start, comma - start);
    start = comma + 1;
    if (entry.empty()) fail("cli", "--devices: empty entry in '{}'", list);
    out.push_back(kind_of_entry(entry).parse(entry));
    if (comma == list.size()) break;
  }
  if (out.empty() || out.size() > 16) fail("cli", "--devices: need 1..16 devices, got {}", out.size());
  return out;
}

std::string describe(const DeviceSpec& s) { return device_kind(s.kind).describe(s); }

std::vector<double> default_ratios(const std::vector<DeviceSpec>& specs) {
  std::vector<double> ratios;
  for (const auto& s : specs) ratios.push_back(device_kind(s.kind).default_ratio(s));
  return ratios;
}

DeviceMemory spec_memory(const DeviceSpec& s) { return device_kind(s.kind).memory(s); }

std::vector<std::unique_ptr<Device>> create_devices(const std::vector<DeviceSpec>& specs, bool map_weights,
                                                    bool repack_mapped) {
  CreateContext ctx;
  ctx.map_weights = map_weights;
  ctx.repack_mapped = repack_mapped;
  ctx.cores = hardware_cores();
  int total_threads = 0;
  for (const auto& s : specs) total_threads += device_kind(s.kind).host_threads(s);
  ctx.spin = total_threads <= ctx.cores;
  std::vector<int> created_of_kind(device_kinds().size(), 0);
  std::vector<std::unique_ptr<Device>> out;
  for (const auto& s : specs) {
    const DeviceKind& kind = device_kind(s.kind);
    ctx.index = created_of_kind[static_cast<size_t>(&kind - device_kinds().data())]++;
    out.push_back(kind.create(s, ctx));
  }
  return out;
}

}  // namespace weft::device
