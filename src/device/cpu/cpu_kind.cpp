#include "device/cpu/cpu_kind.h"

#include "core/error.h"
#include "core/system_memory.h"
#include "core/thread_pool.h"
#include "device/cpu/cpu_device.h"
#include "device/cpu/numa_nodes.h"

#include <fmt/format.h>
#include <unistd.h>

namespace weft::device {
namespace {

DeviceSpec parse_cpu(const std::string& entry) {
  DeviceSpec s;
  s.kind = DeviceSpec::Kind::Cpu;
  if (entry == "cpu") return s;
  if (entry.rfind("cpu:", 0) != 0) fail("cli", "--devices: unknown device '{}' (expected cpu:THREADS[@NUMA])", entry);
  const std::string_view rest = std::string_view(entry).substr(4);
  const size_t at = rest.find('@');
  s.threads = parse_spec_int(rest.substr(0, at), entry, 1, 1024);
  if (at != std::string_view::npos) s.numa_node = parse_spec_int(rest.substr(at + 1), entry, 0, 1023);
  return s;
}

std::string describe_cpu(const DeviceSpec& s) {
  return s.numa_node >= 0 ? fmt::format("cpu:{}@{}", s.threads, s.numa_node) : fmt::format("cpu:{}", s.threads);
}

std::unique_ptr<Device> create_cpu(const DeviceSpec& s, CreateContext& ctx) {
  CpuDeviceOptions o;
  o.index = ctx.index;
  o.n_threads = s.threads;
  o.spin = ctx.spin;
  o.map_weights = ctx.map_weights;
  o.repack_mapped = ctx.repack_mapped;
  o.placement.numa_node = s.numa_node;
  if (s.numa_node >= 0) {
    o.placement.cpus = numa_node_cpus(s.numa_node);
  } else if (ctx.spin) {  // pin only when each thread gets a core of its own
    for (int t = 0; t < s.threads; ++t) o.placement.cpus.push_back(ctx.next_core++ % ctx.cores);
  }
  return std::make_unique<CpuDevice>(o);
}

// "cpu: 16 cores" and a line per NUMA node with its cores and memory.
std::string list_cpu() {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const DeviceMemory m = cpu_memory(-1);
  std::string out = fmt::format("cpu: {} cores, {:.1f} GiB ({:.1f} GiB available); devices cpu:THREADS[@NUMA]\n",
                                hardware_cores(), m.total_bytes / kGiB, m.free_bytes / kGiB);
  for (const auto& n : numa_nodes())
    out += fmt::format("  NUMA node {}: cores {}, {:.1f} GiB ({:.1f} GiB available)\n", n.id, cpu_ranges(n.cpus),
                       n.total_bytes / kGiB, (n.free_bytes + n.file_bytes) / kGiB);
  return out;
}

}  // namespace

DeviceMemory cpu_memory(int numa_node) {
  DeviceMemory m;
  m.hard_limit = false;
  if (numa_node >= 0) {
    for (const auto& n : numa_nodes())
      if (n.id == numa_node) m = {n.total_bytes, n.free_bytes + n.file_bytes, false};
    return m;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) m.total_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  m.free_bytes = available_memory_bytes().value_or(0);
  return m;
}

DeviceKind cpu_kind() {
  return {.kind = DeviceSpec::Kind::Cpu,
          .prefix = "cpu",
          .syntax = "cpu:THREADS[@NUMA]",
          .local = true,
          .parse = parse_cpu,
          .describe = describe_cpu,
          .host_threads = [](const DeviceSpec& s) { return s.threads; },
          .default_ratio = [](const DeviceSpec& s) { return static_cast<double>(s.threads); },
          .create = create_cpu,
          .memory = [](const DeviceSpec& s) { return cpu_memory(s.numa_node); },
          .list_local = list_cpu};
}

}  // namespace weft::device
