// One logical Vulkan device: its queue, memory, buffers, compute pipelines (the embedded shaders)
// and command recording. Each vk: device of a --devices list opens its own (two on one GPU are two
// logical devices, which is how a machine with one GPU tests a split).
#pragma once

#include "device/device.h"
#include "device/vulkan/vk_api.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::device::vk {

// A physical device as `weft info --devices` and vk:N see it, in vk:N order.
struct PhysicalInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint64_t device_local_bytes = 0;  // its largest device-local heap
  uint64_t max_buffer_range = 0;    // maxStorageBufferRange: the largest buffer a shader reads
  uint32_t subgroup_size = 0;
  bool integer_dot = false;       // VK_KHR_shader_integer_dot_product's shaderIntegerDotProduct
  bool integer_dot_fast = false;  // and its signed 4x8 packed dot in hardware, not emulated
  bool subgroup_shuffle = false;  // subgroupShuffleXor in compute shaders
  std::string missing;            // features weft needs that it lacks ("": usable)
  std::string driver;
  // The lanes the matmul shaders size a subgroup's work by: the subgroup, within 8..64.
  uint32_t lanes() const { return std::clamp<uint32_t>(subgroup_size, 8, 64); }
};
// GPUs first (discrete, integrated, virtual), then the rest (software devices such as lavapipe),
// each group in the loader's order.
std::vector<PhysicalInfo> physical_devices();

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t size = 0;
  void* mapped = nullptr;  // host-visible buffers only
};

enum class Memory { Device, Upload, Readback };  // device-local, host-visible write, host-visible read

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t n_bindings = 0, push_bytes = 0;
  uint64_t written = ~uint64_t{0};  // the bindings its shader may write (vk_spirv.h)
};

class Gpu {
 public:
  explicit Gpu(int index);  // vk:index; throws naming what is missing
  ~Gpu();
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  const PhysicalInfo& info() const { return info_; }
  Buffer create_buffer(uint64_t bytes, Memory where, const char* what);
  void destroy(Buffer& b);
  uint64_t allocated_bytes() const { return allocated_; }
  // The embedded shader `name` ("matmul_q4_0"), its layout: n_bindings storage buffers at bindings
  // 0..n-1, push_bytes of push constants, and `spec` as its specialization constants 0, 1, ...
  // (workgroup shapes chosen per device). Created on first use.
  const Pipeline& pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                           const std::vector<uint32_t>& spec = {});
  // A descriptor set binding these buffers to the pipeline's bindings, made once and kept.
  VkDescriptorSet bind(const Pipeline& p, const std::vector<VkBuffer>& buffers);

  // Command recording, submitted and waited for by submit(). flush() submits what is recorded so
  // far without waiting and goes on in another command buffer, so that the GPU runs the start of
  // a step while the host records the rest (commands run in submission order, and barrier()'s
  // dependencies reach into later command buffers).
  // Dispatches, copies and fills are ordered by what they touch: one that reads a buffer written
  // since the last barrier, or writes one read or written since then, gets a barrier first (the
  // shader's written bindings from its SPIR-V; whole buffers, not ranges). Others run together.
  void begin();
  // Ends a recording abandoned by an error (none: nothing) once what it submitted has run, the
  // hand-offs never resumed let go; its buffers may then be destroyed.
  void drop_recording();
  void flush();
  void dispatch(const Pipeline& p, VkDescriptorSet set, const void* push, uint32_t gx, uint32_t gy = 1);
  // Every dispatch or copy recorded before it is complete and visible to every one after it and
  // to the host (a readback, a collective's staging memory).
  void barrier();
  // A buffer bound where a shader's binding goes unused (weft never writes it): no hazards.
  void untracked(VkBuffer b) { untracked_ = b; }
  void copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes);
  void copy_regions(VkBuffer src, VkBuffer dst, const std::vector<VkBufferCopy>& regions);
  void fill_zero(VkBuffer b, uint64_t offset, uint64_t bytes);
  // Ends the recording, submits it and waits for it and every flush() before it; host-visible
  // buffers then hold what they wrote. Every hand_off() before it must have been resumed.
  void submit();
  // A value that leaves the device mid-recording for the host and comes back (a collective):
  // hand_off() submits what is recorded so far, to signal the returned value once it has run
  // (and made its writes visible to the host: barrier() first); the commands recorded after it
  // wait for resume(value), after which the host's writes are visible to them. So the GPU holds
  // the rest of a step while the host waits for the value (wait_for) and combines it.
  uint64_t hand_off();
  void wait_for(uint64_t value);  // bounded: a device that never gets there has hung
  void resume(uint64_t value);
  uint32_t max_group_count() const { return max_groups_; }

  // GPU time by tag, from timestamp queries. mark(tag) starts a span of the recording that runs
  // to the next mark or to the end of the recording; a recording begun while a tag is current (a
  // step resumed after a collective) starts with a span of that tag. Tag -1 times nothing, and is
  // where a Gpu starts. Spans are timed once submit() has waited and summed per tag, read with
  // take_seconds(). Where the queue writes no timestamps (or WEFT_VK_TIMESTAMPS=0) marks only set
  // the tag and take_seconds() stays empty.
  bool timestamps() const { return tick_bits_ > 0; }
  // Room for n marks a recording besides a resumed span (the pool is sized once, for a graph);
  // marks past it are dropped, and the span before them runs on.
  void reserve_marks(uint32_t n);
  void mark(int tag);
  // Seconds per tag (index = tag) summed since the last call, then zeroed.
  std::vector<double> take_seconds();

 private:
  PhysicalInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  VkCommandPool pool_ = VK_NULL_HANDLE;
  // The recording's command buffers, each with the fence of its submission: the one being
  // recorded is cmds_[current_], the ones before it flushed.
  std::vector<VkCommandBuffer> cmds_;
  std::vector<VkFence> fences_;
  size_t current_ = 0;
  bool recording_ = false;
  // hand_off()'s timeline: odd values the GPU signals, each followed by the even one the host
  // signals (resume). The last value given out, the one the next submission waits for (0: none),
  // the highest a submission waits for and the highest the host has signalled.
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t timeline_value_ = 0, next_wait_ = 0, submitted_wait_ = 0, resumed_ = 0;
  VkCommandBuffer cmd() const { return cmds_[current_]; }
  void start(size_t index);  // resets and begins command buffer `index`, made if new
  // Ends the current command buffer and submits it with its fence, waiting for next_wait_ and
  // signalling `signal` (0: nothing) on the timeline.
  void end_and_submit(uint64_t signal = 0);
  VkResult signal(uint64_t value);               // from the host
  VkResult wait_value(uint64_t value) noexcept;  // the host waits for the GPU's value, bounded
  void release_waits() noexcept;                 // lets every submission waiting for the host run, in order
  void wait_submitted(uint32_t n);               // waits for (and resets) the fences of the first n submissions
  std::vector<VkDescriptorPool> descriptor_pools_;
  uint32_t sets_left_ = 0;
  std::map<std::string, Pipeline> pipelines_;
  std::map<std::pair<VkDescriptorSetLayout, std::vector<VkBuffer>>, VkDescriptorSet> sets_;
  std::map<VkDescriptorSet, std::vector<VkBuffer>> set_buffers_;  // what each set binds, in binding order
  // Buffers read and written by what was recorded since the last barrier.
  std::vector<VkBuffer> reads_, writes_;
  VkBuffer untracked_ = VK_NULL_HANDLE;
  void access(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes);
  uint64_t allocated_ = 0;
  uint32_t max_groups_ = 65535;
  // Timestamps: the pool, its slots, the slots this recording wrote and the tag of each.
  uint32_t tick_bits_ = 0;   // the queue's timestampValidBits (0: none)
  double tick_seconds_ = 0;  // timestampPeriod, in seconds
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_slots_ = 0;
  std::vector<int> stamp_tags_;
  int tag_ = -1;
  std::vector<double> tag_seconds_;
  void stamp(int tag);
};

}  // namespace weft::device::vk
