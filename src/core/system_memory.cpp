#include "core/system_memory.h"

#include <cstdio>
#include <cstring>

namespace weft {

std::optional<uint64_t> available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return std::nullopt;
  char line[256];
  std::optional<uint64_t> out;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      out = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace weft
