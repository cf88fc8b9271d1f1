// The Vulkan kind of a build without the Vulkan packages: vk: entries are recognised and refused
// with what to install.
#include "core/error.h"
#include "device/vulkan/vk_kind.h"
#include "device/vulkan/vk_memory_read.h"

namespace weft::device::vk {
namespace {

[[noreturn]] void unavailable(const std::string& entry) {
  fail("cli",
       "--devices: '{}': this weft was built without Vulkan (libvulkan-dev and glslc were missing at build "
       "time; scripts/setup.sh installs them)",
       entry);
}

}  // namespace

DeviceKind vulkan_kind() {
  return {
      .kind = DeviceSpec::Kind::Vulkan,
      .prefix = "vk",
      .syntax = "vk:N",
      .local = true,
      .parse = [](const std::string& entry) -> DeviceSpec { unavailable(entry); },
      .describe = [](const DeviceSpec& s) { return "vk:" + std::to_string(s.index); },
      .host_threads = [](const DeviceSpec&) { return 0; },
      .default_ratio = [](const DeviceSpec&) { return 1.0; },
      .create = [](const DeviceSpec& s, CreateContext&) -> std::unique_ptr<Device> {
        unavailable("vk:" + std::to_string(s.index));
      },
      .memory = [](const DeviceSpec&) { return DeviceMemory{}; },
      .list_local = [] { return std::string("vk: this build has no Vulkan support (scripts/setup.sh, rebuild)\n"); }};
}

struct VkMemoryRead::Impl {};
VkMemoryRead::VkMemoryRead(int index, uint64_t) { unavailable("vk:" + std::to_string(index)); }
VkMemoryRead::~VkMemoryRead() = default;
double VkMemoryRead::read() { return 0; }
uint64_t VkMemoryRead::bytes() const { return 0; }
std::string VkMemoryRead::device_name() const { return {}; }
bool VkMemoryRead::gpu_timed() const { return false; }

}  // namespace weft::device::vk
