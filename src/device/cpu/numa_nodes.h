// The machine's NUMA nodes as libnuma reports them: where a `cpu:T@N` device runs, and what
// `weft info --devices` lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::device {

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // ascending
  uint64_t total_bytes = 0, free_bytes = 0;
  uint64_t file_bytes = 0;  // page cache on the node (a mapped model among it): reclaimable
};

// Every configured node; empty where the kernel has no NUMA support.
std::vector<NumaNode> numa_nodes();
// Node `node`'s CPUs; throws weft::Error("cli", ...) when it does not exist or has none.
std::vector<int> numa_node_cpus(int node);
// "0-3,8-11": CPU ids as ranges.
std::string cpu_ranges(const std::vector<int>& cpus);

}  // namespace weft::device
