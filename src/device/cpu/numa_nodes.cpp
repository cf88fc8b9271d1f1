#include "device/cpu/numa_nodes.h"

#include "core/error.h"

#include <fmt/format.h>
#include <numa.h>

#include <cstdlib>
#include <fstream>

namespace weft::device {
namespace {

std::vector<int> cpus_of(int node) {
  std::vector<int> cpus;
  bitmask* mask = numa_allocate_cpumask();
  if (numa_node_to_cpus(node, mask) == 0)
    for (unsigned c = 0; c < mask->size; ++c)
      if (numa_bitmask_isbitset(mask, c)) cpus.push_back(static_cast<int>(c));
  numa_free_cpumask(mask);
  return cpus;
}

// "Node 0 FilePages:  123 kB" in the node's meminfo; 0 where it is missing.
uint64_t file_pages_bytes(int node) {
  std::ifstream in(fmt::format("/sys/devices/system/node/node{}/meminfo", node));
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find("FilePages:");
    if (at != std::string::npos) return std::strtoull(line.c_str() + at + 10, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace

std::vector<NumaNode> numa_nodes() {
  std::vector<NumaNode> out;
  if (numa_available() < 0) return out;
  for (int n = 0; n <= numa_max_node(); ++n) {
    long long free_bytes = 0;
    const long long total = numa_node_size64(n, &free_bytes);
    if (total < 0) continue;  // a hole in the node numbering
    out.push_back(
        {n, cpus_of(n), static_cast<uint64_t>(total), static_cast<uint64_t>(free_bytes), file_pages_bytes(n)});
  }
  return out;
}

std::vector<int> numa_node_cpus(int node) {
  if (numa_available() < 0 || node > numa_max_node()) fail("cli", "--devices: NUMA node {} does not exist", node);
  std::vector<int> cpus = cpus_of(node);
  if (cpus.empty()) fail("cli", "--devices: NUMA node {} has no CPUs", node);
  return cpus;
}

std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace weft::device
