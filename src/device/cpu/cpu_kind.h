// The CPU device kind: `cpu`, `cpu:THREADS`, `cpu:THREADS@NUMA` (see device_kind.h).
#pragma once

#include "device/device_kind.h"

namespace weft::device {

DeviceKind cpu_kind();
// The memory of NUMA node numa_node, or of the machine (-1): free is what the kernel could give a
// new allocation (MemAvailable, the node's free and file pages). Not a hard limit (see DeviceMemory).
DeviceMemory cpu_memory(int numa_node);

}  // namespace weft::device
