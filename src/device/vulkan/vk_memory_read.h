// The memory bandwidth of a Vulkan device, measured as decode uses it: a compute shader that reads
// a large buffer in device memory once (mem_read.comp), timed by the GPU's timestamps. It is what
// `weft bench --roofline` reads between decoded tokens on vk: devices, as StreamRead is on CPUs:
// decode's weight bytes per second then stand beside the bandwidth measured in the same run. A
// build without Vulkan has the class too; its constructor says that build has no Vulkan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace weft::device::vk {

class VkMemoryRead {
 public:
  // On a logical device of its own on vk:index (beside any the engine holds there): `bytes`
  // rounded down to whole 4 KiB, at most an eighth of the device's memory, in buffers no larger
  // than a shader may read, filled once. Throws weft::Error("vulkan") as Gpu does.
  VkMemoryRead(int index, uint64_t bytes);
  ~VkMemoryRead();
  VkMemoryRead(const VkMemoryRead&) = delete;
  VkMemoryRead& operator=(const VkMemoryRead&) = delete;

  // Reads every byte once; returns bytes per second (GPU time where the queue has timestamps,
  // else the submission's wall time, which counts its launch too).
  double read();
  uint64_t bytes() const;
  std::string device_name() const;  // the GPU's, as weft info --devices shows it
  bool gpu_timed() const;           // whether read() uses timestamps

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::device::vk
