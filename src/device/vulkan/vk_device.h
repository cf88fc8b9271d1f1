// A Vulkan device (vk:N): one logical device on a GPU (or a software Vulkan device such as
// lavapipe), running its per-device graph through VkGraphRunner on a thread of its own. In a
// group its collectives go through host memory into the group's shared-memory or Gloo transport.
#pragma once

#include "device/device.h"
#include "device/group_member.h"
#include "device/job_thread.h"

#include <memory>
#include <thread>

namespace weft::device::vk {

class Gpu;
class VkGraphRunner;

class VulkanDevice : public Device {
 public:
  explicit VulkanDevice(int gpu_index);
  ~VulkanDevice() override;

  std::string name() const override;
  bool supports(parallel::LocalOp op, DType t) const override;
  int threads() const override { return 1; }
  Reach reach() const override { return {true, "", "vk"}; }
  void begin_join(GroupJoin join) override;
  void finish_join() override;
  std::string_view group_transport() const override { return member_.transport(); }
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) override;
  void submit(Step step) override;
  bool poll(int timeout_ms) override;
  StepResult wait() override;
  void abort() override;
  DeviceStats stats() const override;
  DeviceMemory memory() const override;

 private:
  [[noreturn]] void rethrow_named(std::exception_ptr e) const;

  int gpu_index_;
  GroupMember member_;
  std::unique_ptr<Gpu> gpu_;
  std::unique_ptr<VkGraphRunner> runner_;
  Step step_;
  StepResult result_;
  JobThread thread_;  // last: stopped (and the runner released on it) before the rest goes
};

// The memory of vk:index as Device::memory reports it (weft plan asks without creating one).
DeviceMemory vk_memory(int gpu_index);

}  // namespace weft::device::vk
