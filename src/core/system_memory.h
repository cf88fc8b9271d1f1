// What the machine has left: the kernel's estimate of memory a new allocation can take without
// swapping (MemAvailable: free memory plus reclaimable page cache, such as a mapped model file).
#pragma once

#include <cstdint>
#include <optional>

namespace weft {

// nullopt where /proc/meminfo is missing or has no MemAvailable line.
std::optional<uint64_t> available_memory_bytes();

}  // namespace weft
