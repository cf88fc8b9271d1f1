// Parsing --devices and creating the devices it names. Each entry belongs to the kind whose prefix it
// starts with (device_kind.h), which parses and creates it:
//   cpu:T        a CPU device with T threads, on the next T free cores
//   cpu:T@N      the same, bound to NUMA node N (cores and memory)
//   cpu          one thread
//   tcp://H:P    a worker process (`weft worker`) at host H, port P
//   vk:N         Vulkan device N of this machine (GPUs first, then software ones such as lavapipe)
#pragma once

#include "device/device.h"

#include <memory>
#include <string>
#include <vector>

namespace weft::device {

struct DeviceSpec {
  enum class Kind { Cpu, Remote, Vulkan } kind = Kind::Cpu;
  int threads = 1;
  int numa_node = -1;
  std::string address;  // Remote: host:port
  int index = 0;        // Vulkan: the device's place in vk_kind's order
};

// Throws weft::Error("cli", ...) on a malformed list, naming the bad entry.
std::vector<DeviceSpec> parse_devices(const std::string& list);
std::string describe(const DeviceSpec& s);
// Each device's share of a split when -ts gives none, as its kind judges its speed (CPU: threads).
std::vector<double> default_ratios(const std::vector<DeviceSpec>& specs);
// What the device of s can hold (see Device::memory), asked without creating it (weft plan).
DeviceMemory spec_memory(const DeviceSpec& s);

// Creates the devices; CPU devices get disjoint cores in order. Threads spin only when the
// process's threads fit on the machine's cores. map_weights, repack_mapped: see CpuDeviceOptions.
std::vector<std::unique_ptr<Device>> create_devices(const std::vector<DeviceSpec>& specs, bool map_weights = false,
                                                    bool repack_mapped = false);

}  // namespace weft::device
