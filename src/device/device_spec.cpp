#include "device/device_spec.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/cpu/cpu_device.h"
#include "device/remote/remote_device.h"

#include <fmt/format.h>
#include <numa.h>

#include <charconv>

namespace weft::device {
namespace {

int parse_int(std::string_view s, const std::string& entry, int lo, int hi) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    fail("cli", "--devices: '{}': '{}' is not a number in {}..{}", entry, s, lo, hi);
  return v;
}

std::vector<int> numa_cpus(int node) {
  std::vector<int> cpus;
  if (numa_available() < 0 || node > numa_max_node()) fail("cli", "--devices: NUMA node {} does not exist", node);
  bitmask* mask = numa_allocate_cpumask();
  if (numa_node_to_cpus(node, mask) == 0)
    for (unsigned c = 0; c < mask->size; ++c)
      if (numa_bitmask_isbitset(mask, c)) cpus.push_back(static_cast<int>(c));
  numa_free_cpumask(mask);
  if (cpus.empty()) fail("cli", "--devices: NUMA node {} has no CPUs", node);
  return cpus;
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
    DeviceSpec s;
    if (entry.rfind("tcp://", 0) == 0) {
      s.kind = DeviceSpec::Kind::Remote;
      s.address = entry.substr(6);
      if (s.address.find(':') == std::string::npos) fail("cli", "--devices: '{}' needs host:port", entry);
    } else if (entry == "cpu") {
    } else if (entry.rfind("cpu:", 0) == 0) {
      std::string_view rest = std::string_view(entry).substr(4);
      const size_t at = rest.find('@');
      s.threads = parse_int(rest.substr(0, at), entry, 1, 1024);
      if (at != std::string_view::npos) s.numa_node = parse_int(rest.substr(at + 1), entry, 0, 1023);
    } else {
      fail("cli", "--devices: unknown device '{}' (expected cpu:THREADS[@NUMA] or tcp://HOST:PORT)", entry);
    }
    out.push_back(s);
    if (comma == list.size()) break;
  }
  if (out.empty() || out.size() > 16) fail("cli", "--devices: need 1..16 devices, got {}", out.size());
  return out;
}

std::string describe(const DeviceSpec& s) {
  if (s.kind == DeviceSpec::Kind::Remote) return "tcp://" + s.address;
  return s.numa_node >= 0 ? fmt::format("cpu:{}@{}", s.threads, s.numa_node) : fmt::format("cpu:{}", s.threads);
}

std::vector<std::unique_ptr<Device>> create_devices(const std::vector<DeviceSpec>& specs, bool map_weights) {
  const int cores = hardware_cores();
  int total_threads = 0;
  for (const auto& s : specs) total_threads += s.kind == DeviceSpec::Kind::Cpu ? s.threads : 0;
  const bool spin = total_threads <= cores;
  std::vector<std::unique_ptr<Device>> out;
  int next_core = 0, index = 0;
  for (const auto& s : specs) {
    if (s.kind == DeviceSpec::Kind::Remote) {
      out.push_back(std::make_unique<remote::RemoteDevice>(s.address, s.threads, remote::coordinator_key()));
      continue;
    }
    CpuDeviceOptions o;
    o.index = index++;
    o.n_threads = s.threads;
    o.spin = spin;
    o.map_weights = map_weights;
    o.placement.numa_node = s.numa_node;
    if (s.numa_node >= 0) {
      o.placement.cpus = numa_cpus(s.numa_node);
    } else if (spin) {  // pin only when each thread gets a core of its own
      for (int t = 0; t < s.threads; ++t) o.placement.cpus.push_back(next_core++ % cores);
    }
    out.push_back(std::make_unique<CpuDevice>(o));
  }
  return out;
}

}  // namespace weft::device
