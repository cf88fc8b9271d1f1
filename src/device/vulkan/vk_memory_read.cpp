#include "device/vulkan/vk_memory_read.h"

#include "core/error.h"
#include "device/vulkan/vk_gpu.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace weft::device::vk {
namespace {

struct ReadPush {
  uint32_t n, stride;  // uvec4s of the part, threads of the grid
};

constexpr uint32_t kGroup = 256;          // mem_read.comp's local_size_x
constexpr uint32_t kVec4sPerThread = 16;  // a grid a sixteenth of the part: enough loads in flight
constexpr uint64_t kPartLimit = uint64_t{1} << 30;

}  // namespace

struct VkMemoryRead::Impl {
  explicit Impl(int index) : gpu(index) {}
  ~Impl() {
    for (auto& p : parts) gpu.destroy(p.data), gpu.destroy(p.sums);
  }
  struct Part {
    Buffer data, sums;
    uint32_t n = 0, groups = 0;
  };
  Gpu gpu;
  std::vector<Part> parts;
  uint64_t bytes = 0;

  void record(const char* shader) {
    const Pipeline& p = gpu.pipeline(shader, 2, sizeof(ReadPush));
    // The parts are read side by side: no part waits for another (each writes its own sums).
    for (const Part& part : parts) {
      const ReadPush push{part.n, part.groups * kGroup};
      gpu.dispatch(p, gpu.bind(p, {part.data.buffer, part.sums.buffer}), &push, part.groups);
    }
  }
};

VkMemoryRead::VkMemoryRead(int index, uint64_t bytes) : impl_(std::make_unique<Impl>(index)) {
  Impl& m = *impl_;
  const PhysicalInfo& info = m.gpu.info();
  const uint64_t cap = info.device_local_bytes / 8;
  bytes = std::min(bytes, cap) / 4096 * 4096;
  if (bytes == 0) fail("vulkan", "{}: no memory to read (asked {} bytes, device {} bytes)", info.name, bytes, cap * 8);
  // Each part: whole uvec4s, within maxStorageBufferRange and a workgroup count the device takes.
  const uint64_t per_part = std::min<uint64_t>({info.max_buffer_range / 4096 * 4096, kPartLimit,
                                                uint64_t{m.gpu.max_group_count()} * kGroup * kVec4sPerThread * 16});
  for (uint64_t done = 0; done < bytes; done += per_part) {
    Impl::Part part;
    const uint64_t b = std::min(per_part, bytes - done);
    part.n = static_cast<uint32_t>(b / 16);
    part.groups = std::max<uint32_t>(1, (part.n + kGroup * kVec4sPerThread - 1) / (kGroup * kVec4sPerThread));
    part.data = m.gpu.create_buffer(b, Memory::Device, "the bandwidth probe's buffer");
    part.sums = m.gpu.create_buffer(part.groups * 4, Memory::Device, "the bandwidth probe's sums");
    m.parts.push_back(part);
  }
  m.bytes = bytes;
  m.gpu.reserve_marks(1);
  m.gpu.begin();
  m.record("mem_fill");
  m.gpu.submit();
  read();  // the first read makes the pipeline and touches every page
}

VkMemoryRead::~VkMemoryRead() = default;

double VkMemoryRead::read() {
  Impl& m = *impl_;
  m.gpu.begin();
  m.gpu.barrier();  // after the last read's (or the fill's) writes
  m.gpu.mark(0);
  m.record("mem_read");
  m.gpu.mark(-1);
  const auto t0 = std::chrono::steady_clock::now();
  m.gpu.submit();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double> gpu = m.gpu.take_seconds();
  const double s = !gpu.empty() && gpu[0] > 0 ? gpu[0] : wall;
  return static_cast<double>(m.bytes) / s;
}

uint64_t VkMemoryRead::bytes() const { return impl_->bytes; }
std::string VkMemoryRead::device_name() const { return impl_->gpu.info().name; }
bool VkMemoryRead::gpu_timed() const { return impl_->gpu.timestamps(); }

}  // namespace weft::device::vk
