#include "device/vulkan/vk_device.h"

#include "core/error.h"
#include "device/vulkan/vk_gpu.h"
#include "device/vulkan/vk_graph_runner.h"

#include <fmt/format.h>

#include <utility>

namespace weft::device::vk {

VulkanDevice::VulkanDevice(int gpu_index)
    : gpu_index_(gpu_index), thread_([this] {
        runner_.reset();  // GPU objects are released on the thread that made them
        gpu_.reset();
      }) {
  // The logical device is opened on the device thread, where it is used.
  if (auto e = thread_.call([this] { gpu_ = std::make_unique<Gpu>(gpu_index_); })) rethrow_named(e);
}

VulkanDevice::~VulkanDevice() = default;

std::string VulkanDevice::name() const { return fmt::format("vk:{}", gpu_index_); }

bool VulkanDevice::supports(parallel::LocalOp op, DType t) const { return vk_supports(op, t); }

void VulkanDevice::begin_join(GroupJoin j) { member_.begin(std::move(j)); }

void VulkanDevice::finish_join() {
  if (auto e = member_.finish()) rethrow_named(e);
}

void VulkanDevice::load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) {
  if (auto e = thread_.call([&] {
        runner_ = std::make_unique<VkGraphRunner>(*gpu_, member_.group());
        runner_->load(graph, weights, opt);
      }))
    rethrow_named(e);
}

void VulkanDevice::submit(Step step) {
  if (!runner_) fail("vulkan", "{}: submit before load", name());
  if (!thread_.poll(0)) fail("vulkan", "{}: submit while a step is running", name());
  step_ = std::move(step);
  thread_.start([this] { result_ = runner_->run(step_); });
}

bool VulkanDevice::poll(int timeout_ms) { return thread_.poll(timeout_ms); }

StepResult VulkanDevice::wait() {
  if (auto e = thread_.wait()) rethrow_named(e);
  return std::move(result_);
}

void VulkanDevice::abort() { member_.abort(); }

void VulkanDevice::rethrow_named(std::exception_ptr e) const {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    throw err.on_device(name());
  }
}

DeviceStats VulkanDevice::stats() const { return runner_ ? runner_->stats() : DeviceStats{}; }

DeviceMemory VulkanDevice::memory() const { return vk_memory(gpu_index_); }

DeviceMemory vk_memory(int gpu_index) {
  const auto all = physical_devices();
  if (gpu_index < 0 || gpu_index >= static_cast<int>(all.size())) return {};
  const PhysicalInfo& p = all[gpu_index];
  // A software device's memory is the host's and grows past its heap; a GPU's does not.
  return {p.device_local_bytes, p.device_local_bytes, p.type != VK_PHYSICAL_DEVICE_TYPE_CPU};
}

}  // namespace weft::device::vk
