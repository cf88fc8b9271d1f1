#include "device/vulkan/vk_kind.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/vulkan/vk_device.h"
#include "device/vulkan/vk_gpu.h"

#include <fmt/format.h>

#include <optional>

namespace weft::device::vk {
namespace {

DeviceSpec parse_vk(const std::string& entry) {
  DeviceSpec s;
  s.kind = DeviceSpec::Kind::Vulkan;
  s.threads = 1;
  if (entry == "vk") return s;
  if (entry.rfind("vk:", 0) != 0) fail("cli", "--devices: unknown device '{}' (expected vk:N)", entry);
  s.index = parse_spec_int(std::string_view(entry).substr(3), entry, 0, 63);
  return s;
}

// The physical device of s, or null where Vulkan or the device is missing (create() says why).
std::optional<PhysicalInfo> physical(const DeviceSpec& s) {
  try {
    auto all = physical_devices();
    if (s.index < static_cast<int>(all.size())) return all[s.index];
  } catch (const Error&) {
  }
  return std::nullopt;
}

std::string_view type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "software (CPU)";
    default: return "other";
  }
}

std::string list_vk() {
  std::vector<PhysicalInfo> all;
  try {
    all = physical_devices();
  } catch (const Error& e) {
    return fmt::format("vk: none ({})\n", e.what());
  }
  if (all.empty()) return "vk: none (the Vulkan loader found no device)\n";
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::string out = fmt::format("vk: {} device{}; devices vk:N\n", all.size(), all.size() == 1 ? "" : "s");
  for (size_t i = 0; i < all.size(); ++i) {
    const PhysicalInfo& p = all[i];
    out += fmt::format(
        "  vk:{} {} ({}, {}): {:.1f} GiB device memory, largest buffer {} MiB, subgroup {}, "
        "integer dot product {}{}\n",
        i, p.name, type_name(p.type), p.driver, p.device_local_bytes / kGiB, p.max_buffer_range >> 20, p.subgroup_size,
        p.integer_dot_fast ? "in hardware"
        : p.integer_dot    ? "emulated"
                           : "no",
        p.missing.empty() ? "" : fmt::format("; unusable: lacks {}", p.missing));
  }
  return out;
}

}  // namespace

DeviceKind vulkan_kind() {
  return {.kind = DeviceSpec::Kind::Vulkan,
          .prefix = "vk",
          .syntax = "vk:N",
          .local = true,
          .parse = parse_vk,
          .describe = [](const DeviceSpec& s) { return fmt::format("vk:{}", s.index); },
          // A software device computes on every core of this machine (its own threads).
          .host_threads =
              [](const DeviceSpec& s) {
                const auto p = physical(s);
                return p && p->type == VK_PHYSICAL_DEVICE_TYPE_CPU ? hardware_cores() : 1;
              },
          // A prior of its speed against cpu:THREADS (a share per core): -ts or -ts auto know better.
          .default_ratio =
              [](const DeviceSpec& s) {
                const auto p = physical(s);
                if (!p || p->type == VK_PHYSICAL_DEVICE_TYPE_CPU) return static_cast<double>(hardware_cores());
                return p->type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 64.0 : 16.0;
              },
          .create = [](const DeviceSpec& s, CreateContext&) -> std::unique_ptr<Device> {
            return std::make_unique<VulkanDevice>(s.index);
          },
          .memory = [](const DeviceSpec& s) { return vk_memory(s.index); },
          .list_local = list_vk};
}

}  // namespace weft::device::vk
