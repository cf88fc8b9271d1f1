#include "device/vulkan/vk_gpu.h"

#include "core/error.h"
#include "device/vulkan/vk_shaders.h"
#include "device/vulkan/vk_spirv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace weft::device::vk {
namespace {

// Bounded waits: a step that has not finished in two minutes is a hung device, not a slow one.
constexpr uint64_t kHungNs = uint64_t{120} * 1000000000;

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
  }
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
  const Api& a = api();
  uint32_t n = 0;
  a.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> ext(n);
  a.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, ext.data());
  for (const auto& e : ext)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// The features weft's shaders use, queried (enable = false) or to be enabled.
struct Features {
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  Features() {
    f2.pNext = &v11;
    v11.pNext = &v12;
  }
  Features(const Features&) = delete;
};

std::string missing_features(VkPhysicalDevice pd, uint32_t api_version) {
  if (VK_API_VERSION_MAJOR(api_version) == 1 && VK_API_VERSION_MINOR(api_version) < 2)
    return fmt::format("Vulkan 1.2 (it has {}.{})", VK_API_VERSION_MAJOR(api_version),
                       VK_API_VERSION_MINOR(api_version));
  Features f;
  api().vkGetPhysicalDeviceFeatures2(pd, &f.f2);
  std::string m;
  auto need = [&](VkBool32 have, const char* name) {
    if (!have) m += fmt::format("{}{}", m.empty() ? "" : ", ", name);
  };
  need(f.v11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  need(f.v12.storageBuffer8BitAccess, "storageBuffer8BitAccess");
  need(f.v12.shaderInt8, "shaderInt8");
  need(f.f2.features.shaderInt16, "shaderInt16");
  need(f.v12.timelineSemaphore, "timelineSemaphore");
  return m;
}

}  // namespace

std::vector<PhysicalInfo> physical_devices() {
  const Instance& in = instance();
  const Api& a = in.api;
  uint32_t n = 0;
  check(a.vkEnumeratePhysicalDevices(in.instance, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> pds(n);
  check(a.vkEnumeratePhysicalDevices(in.instance, &n, pds.data()), "vkEnumeratePhysicalDevices");
  std::vector<PhysicalInfo> out;
  for (VkPhysicalDevice pd : pds) {
    PhysicalInfo i;
    i.handle = pd;
    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    sub.pNext = &drv;
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sub;
    a.vkGetPhysicalDeviceProperties2(pd, &p2);
    i.name = p2.properties.deviceName;
    i.type = p2.properties.deviceType;
    i.max_buffer_range = p2.properties.limits.maxStorageBufferRange;
    i.subgroup_size = sub.subgroupSize;
    i.subgroup_shuffle = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                         (sub.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    if (!(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        !(sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
      i.missing = "subgroup arithmetic in compute shaders";
    i.driver = drv.driverName;
    VkPhysicalDeviceMemoryProperties mp;
    a.vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t h = 0; h < mp.memoryHeapCount; ++h)
      if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
        i.device_local_bytes = std::max<uint64_t>(i.device_local_bytes, mp.memoryHeaps[h].size);
    if (has_extension(pd, "VK_KHR_shader_integer_dot_product")) {
      VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
      VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      f2.pNext = &dot;
      a.vkGetPhysicalDeviceFeatures2(pd, &f2);
      VkPhysicalDeviceShaderIntegerDotProductProperties dp{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
      VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      pp.pNext = &dp;
      a.vkGetPhysicalDeviceProperties2(pd, &pp);
      i.integer_dot = dot.shaderIntegerDotProduct;
      i.integer_dot_fast = i.integer_dot && dp.integerDotProduct4x8BitPackedSignedAccelerated;
    }
    if (i.missing.empty()) i.missing = missing_features(pd, p2.properties.apiVersion);
    out.push_back(std::move(i));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const PhysicalInfo& x, const PhysicalInfo& y) { return type_rank(x.type) < type_rank(y.type); });
  return out;
}

Gpu::Gpu(int index) {
  const auto all = physical_devices();
  if (index < 0 || index >= static_cast<int>(all.size()))
    fail_on("vulkan", fmt::format("vk:{}", index),
            "this machine has {} Vulkan device{} (weft info --devices lists them)", all.size(),
            all.size() == 1 ? "" : "s");
  info_ = all[index];
  // Named as the device (vk:N) on the error itself, so the device's own naming adds nothing.
  if (!info_.missing.empty())
    fail_on("vulkan", fmt::format("vk:{}", index), "{} lacks what weft needs: {}", info_.name, info_.missing);
  const Api& a = api();
  uint32_t nq = 0;
  a.vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  a.vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &nq, qf.data());
  bool found = false;
  for (uint32_t q = 0; q < nq && !found; ++q)
    if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) family_ = q, found = true;
  if (!found) fail_on("vulkan", fmt::format("vk:{}", index), "{} has no compute queue", info_.name);

  const float priority = 1.f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  Features f;  // exactly the features missing_features checked
  f.v11.storageBuffer16BitAccess = VK_TRUE;
  f.v12.storageBuffer8BitAccess = VK_TRUE;
  f.v12.shaderInt8 = VK_TRUE;
  f.f2.features.shaderInt16 = VK_TRUE;
  f.v12.timelineSemaphore = VK_TRUE;
  // The integer dot product where the device has it (the matmuls' *_dot shaders).
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  const char* dot_extension = "VK_KHR_shader_integer_dot_product";
  if (info_.integer_dot) {
    dot.shaderIntegerDotProduct = VK_TRUE;
    f.v12.pNext = &dot;
  }
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.pNext = &f.f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  if (info_.integer_dot) {
    di.enabledExtensionCount = 1;
    di.ppEnabledExtensionNames = &dot_extension;
  }
  check(a.vkCreateDevice(info_.handle, &di, nullptr, &device_), "vkCreateDevice");
  a.vkGetDeviceQueue(device_, family_, 0, &queue_);
  a.vkGetPhysicalDeviceMemoryProperties(info_.handle, &mem_props_);
  VkPhysicalDeviceProperties props;
  a.vkGetPhysicalDeviceProperties(info_.handle, &props);
  max_groups_ = std::min(props.limits.maxComputeWorkGroupCount[0], props.limits.maxComputeWorkGroupCount[1]);
  // Where timestampComputeAndGraphics is false some queues write no timestamps: the family's own
  // timestampValidBits says whether this one does (0: none; op times then stay unmeasured).
  const char* ts_env = std::getenv("WEFT_VK_TIMESTAMPS");
  if (!(ts_env && std::strcmp(ts_env, "0") == 0)) {
    tick_bits_ = qf[family_].timestampValidBits;
    tick_seconds_ = props.limits.timestampPeriod * 1e-9;
    if (tick_seconds_ <= 0) tick_bits_ = 0;
  }

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = family_;
  check(a.vkCreateCommandPool(device_, &pi, nullptr, &pool_), "vkCreateCommandPool");

  VkSemaphoreTypeCreateInfo ti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  si.pNext = &ti;
  check(a.vkCreateSemaphore(device_, &si, nullptr, &timeline_), "vkCreateSemaphore");
}

Gpu::~Gpu() {
  const Api& a = api();
  if (timeline_) release_waits();
  a.vkDeviceWaitIdle(device_);
  if (timeline_) a.vkDestroySemaphore(device_, timeline_, nullptr);
  for (auto& [name, p] : pipelines_) {
    a.vkDestroyPipeline(device_, p.pipeline, nullptr);
    a.vkDestroyPipelineLayout(device_, p.layout, nullptr);
    a.vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
  }
  for (VkDescriptorPool dp : descriptor_pools_) a.vkDestroyDescriptorPool(device_, dp, nullptr);
  if (queries_) a.vkDestroyQueryPool(device_, queries_, nullptr);
  for (VkFence f : fences_) a.vkDestroyFence(device_, f, nullptr);
  a.vkDestroyCommandPool(device_, pool_, nullptr);
  a.vkDestroyDevice(device_, nullptr);
}

Buffer Gpu::create_buffer(uint64_t bytes, Memory where, const char* what) {
  const Api& a = api();
  Buffer b;
  b.size = std::max<uint64_t>(bytes, 4);
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = b.size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(a.vkCreateBuffer(device_, &bi, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  a.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  std::vector<VkMemoryPropertyFlags> wanted;  // in order of preference
  if (where == Memory::Device) wanted = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
  if (where == Memory::Upload) wanted = {host};
  if (where == Memory::Readback) wanted = {host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, host};
  int type = -1;
  for (VkMemoryPropertyFlags w : wanted) {
    for (uint32_t t = 0; t < mem_props_.memoryTypeCount && type < 0; ++t)
      if ((req.memoryTypeBits & (1u << t)) && (mem_props_.memoryTypes[t].propertyFlags & w) == w) type = int(t);
    if (type >= 0) break;
  }
  if (type < 0) fail("vulkan", "{}: no memory type for {}", info_.name, what);
  VkMemoryAllocateInfo mi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mi.allocationSize = req.size;
  mi.memoryTypeIndex = static_cast<uint32_t>(type);
  const VkResult r = a.vkAllocateMemory(device_, &mi, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device_, b.buffer, nullptr);
    fail("vulkan", "{}: cannot allocate {:.1f} MiB for {} ({} already): {}", info_.name, req.size / 1048576.0, what,
         allocated_ / 1048576.0, result_name(r));
  }
  check(a.vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
  if (where != Memory::Device) check(a.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  allocated_ += req.size;
  return b;
}

void Gpu::destroy(Buffer& b) {
  if (!b.buffer) return;
  const Api& a = api();
  a.vkDestroyBuffer(device_, b.buffer, nullptr);
  a.vkFreeMemory(device_, b.memory, nullptr);
  b = {};
}

const Pipeline& Gpu::pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                              const std::vector<uint32_t>& spec) {
  std::string key = name;
  for (uint32_t v : spec) key += fmt::format(":{}", v);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  const auto code = shader_spirv(name);
  if (code.empty()) fail("vulkan", "no shader '{}' in this build", name);
  const Api& a = api();
  Pipeline p;
  p.n_bindings = n_bindings;
  p.push_bytes = push_bytes;
  p.written = written_bindings(code);
  std::vector<VkDescriptorSetLayoutBinding> b(n_bindings);
  for (uint32_t i = 0; i < n_bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = n_bindings;
  li.pBindings = b.data();
  check(a.vkCreateDescriptorSetLayout(device_, &li, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p.set_layout;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &range;
  check(a.vkCreatePipelineLayout(device_, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
  VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  si.codeSize = code.size_bytes();
  si.pCode = code.data();
  VkShaderModule module;
  check(a.vkCreateShaderModule(device_, &si, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo si_spec{static_cast<uint32_t>(spec.size()), entries.data(), spec.size() * 4, spec.data()};
  if (!spec.empty()) ci.stage.pSpecializationInfo = &si_spec;
  ci.layout = p.layout;
  const VkResult r = a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline);
  a.vkDestroyShaderModule(device_, module, nullptr);
  check(r, fmt::format("vkCreateComputePipelines({})", name));
  return pipelines_.emplace(key, p).first->second;
}

VkDescriptorSet Gpu::bind(const Pipeline& p, const std::vector<VkBuffer>& buffers) {
  WEFT_ASSERT(buffers.size() == p.n_bindings);
  auto key = std::make_pair(p.set_layout, buffers);
  if (auto it = sets_.find(key); it != sets_.end()) return it->second;
  const Api& a = api();
  constexpr uint32_t kSetsPerPool = 256;
  if (sets_left_ == 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = kSetsPerPool;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    VkDescriptorPool dp;
    check(a.vkCreateDescriptorPool(device_, &pi, nullptr, &dp), "vkCreateDescriptorPool");
    descriptor_pools_.push_back(dp);
    sets_left_ = kSetsPerPool;
  }
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = descriptor_pools_.back();
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &p.set_layout;
  VkDescriptorSet set;
  check(a.vkAllocateDescriptorSets(device_, &ai, &set), "vkAllocateDescriptorSets");
  --sets_left_;
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  std::vector<VkWriteDescriptorSet> writes(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    infos[i] = {buffers[i], 0, VK_WHOLE_SIZE};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  a.vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  set_buffers_.emplace(set, buffers);
  sets_.emplace(std::move(key), set);
  return set;
}

void Gpu::start(size_t index) {
  const Api& a = api();
  if (index == cmds_.size()) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cb;
    check(a.vkAllocateCommandBuffers(device_, &ai, &cb), "vkAllocateCommandBuffers");
    cmds_.push_back(cb);
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence f;
    check(a.vkCreateFence(device_, &fi, nullptr, &f), "vkCreateFence");
    fences_.push_back(f);
  }
  current_ = index;
  check(a.vkResetCommandBuffer(cmd(), 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(a.vkBeginCommandBuffer(cmd(), &bi), "vkBeginCommandBuffer");
}

void Gpu::drop_recording() {
  if (!recording_) return;
  api().vkEndCommandBuffer(cmd());
  recording_ = false;
  release_waits();
  if (current_ > 0) wait_submitted(static_cast<uint32_t>(current_));
  next_wait_ = 0;
}

void Gpu::begin() {
  const Api& a = api();
  drop_recording();  // one abandoned by an error: what it submitted must finish before reuse
  start(0);
  reads_.clear();  // what came before has finished
  writes_.clear();
  recording_ = true;
  stamp_tags_.clear();
  if (queries_) {
    // Queries of one queue run in submission order: the reset comes before this recording's writes.
    a.vkCmdResetQueryPool(cmd(), queries_, 0, query_slots_);
    if (tag_ >= 0) stamp(tag_);
  }
}

void Gpu::reserve_marks(uint32_t n) {
  WEFT_ASSERT(!recording_);
  if (!timestamps() || n + 2 <= query_slots_) return;
  const Api& a = api();
  if (queries_) a.vkDestroyQueryPool(device_, queries_, nullptr), queries_ = VK_NULL_HANDLE;
  VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = n + 2;  // and the resumed span's first stamp and the recording's last
  check(a.vkCreateQueryPool(device_, &qi, nullptr, &queries_), "vkCreateQueryPool");
  query_slots_ = qi.queryCount;
}

// A timestamp once every command recorded before it has finished (bottom of pipe): with the
// barriers between ops, the span from one stamp to the next is the GPU time of what lies between.
void Gpu::stamp(int tag) {
  if (stamp_tags_.size() + 1 >= query_slots_) return;  // the last slot is the recording's end
  api().vkCmdWriteTimestamp(cmd(), VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                            static_cast<uint32_t>(stamp_tags_.size()));
  stamp_tags_.push_back(tag);
}

void Gpu::mark(int tag) {
  if (recording_ && queries_ && tag != tag_) stamp(tag);
  tag_ = tag;
}

std::vector<double> Gpu::take_seconds() {
  std::vector<double> out;
  out.swap(tag_seconds_);
  return out;
}

void Gpu::dispatch(const Pipeline& p, VkDescriptorSet set, const void* push, uint32_t gx, uint32_t gy) {
  WEFT_ASSERT(recording_);
  if (gx == 0 || gy == 0) return;
  if (gx > max_groups_ || gy > max_groups_)
    fail("vulkan", "{}: a dispatch of {} x {} workgroups exceeds the device's {}", info_.name, gx, gy, max_groups_);
  const std::vector<VkBuffer>& bound = set_buffers_.at(set);
  std::vector<VkBuffer> writes;
  for (size_t i = 0; i < bound.size(); ++i)
    if (i >= 64 || (p.written >> i) & 1) writes.push_back(bound[i]);
  access(bound, writes);
  const Api& a = api();
  a.vkCmdBindPipeline(cmd(), VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  a.vkCmdBindDescriptorSets(cmd(), VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (p.push_bytes) a.vkCmdPushConstants(cmd(), p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
  a.vkCmdDispatch(cmd(), gx, gy, 1);
}

void Gpu::barrier() {
  WEFT_ASSERT(recording_);
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  api().vkCmdPipelineBarrier(cmd(), stages, stages | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  reads_.clear();
  writes_.clear();
}

void Gpu::access(std::span<const VkBuffer> reads, std::span<const VkBuffer> writes) {
  auto touched = [&](const std::vector<VkBuffer>& since, VkBuffer b) {
    return b != untracked_ && std::find(since.begin(), since.end(), b) != since.end();
  };
  bool hazard = false;
  for (VkBuffer b : reads) hazard = hazard || touched(writes_, b);
  for (VkBuffer b : writes) hazard = hazard || touched(writes_, b) || touched(reads_, b);
  if (hazard) barrier();
  reads_.insert(reads_.end(), reads.begin(), reads.end());
  writes_.insert(writes_.end(), writes.begin(), writes.end());
}

void Gpu::copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes) {
  if (bytes == 0) return;
  copy_regions(src, dst, {{src_offset, dst_offset, bytes}});
}

void Gpu::copy_regions(VkBuffer src, VkBuffer dst, const std::vector<VkBufferCopy>& regions) {
  WEFT_ASSERT(recording_);
  if (regions.empty()) return;
  access(std::span(&src, 1), std::span(&dst, 1));
  api().vkCmdCopyBuffer(cmd(), src, dst, static_cast<uint32_t>(regions.size()), regions.data());
}

void Gpu::fill_zero(VkBuffer b, uint64_t offset, uint64_t bytes) {
  WEFT_ASSERT(recording_ && bytes % 4 == 0);
  if (bytes == 0) return;
  access({}, std::span(&b, 1));
  api().vkCmdFillBuffer(cmd(), b, offset, bytes, 0);
}

void Gpu::end_and_submit(uint64_t signal) {
  const Api& a = api();
  check(a.vkEndCommandBuffer(cmd()), "vkEndCommandBuffer");
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ti;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmds_[current_];
  const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  if (next_wait_) {
    si.waitSemaphoreCount = ti.waitSemaphoreValueCount = 1;
    si.pWaitSemaphores = &timeline_;
    si.pWaitDstStageMask = &wait_stage;
    ti.pWaitSemaphoreValues = &next_wait_;
    submitted_wait_ = next_wait_;
  }
  if (signal) {
    si.signalSemaphoreCount = ti.signalSemaphoreValueCount = 1;
    si.pSignalSemaphores = &timeline_;
    ti.pSignalSemaphoreValues = &signal;
  }
  check(a.vkQueueSubmit(queue_, 1, &si, fences_[current_]), "vkQueueSubmit");
  next_wait_ = 0;
}

uint64_t Gpu::hand_off() {
  WEFT_ASSERT(recording_);
  const uint64_t ready = ++timeline_value_;
  end_and_submit(ready);
  start(current_ + 1);
  next_wait_ = ++timeline_value_;
  // The host's writes before resume() reach what follows: a semaphore signalled on the host
  // orders them, this makes them visible.
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  api().vkCmdPipelineBarrier(cmd(), VK_PIPELINE_STAGE_HOST_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                             nullptr, 0, nullptr);
  return ready;
}

VkResult Gpu::wait_value(uint64_t value) noexcept {
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  return api().vkWaitSemaphores(device_, &wi, kHungNs);
}

void Gpu::wait_for(uint64_t value) {
  const VkResult r = wait_value(value);
  if (r == VK_TIMEOUT) fail("vulkan", "{}: a submission did not finish in 120 s", info_.name);
  check(r, "vkWaitSemaphores");
}

void Gpu::resume(uint64_t value) {
  WEFT_ASSERT(value % 2 == 1 && value + 1 > resumed_);
  check(signal(value + 1), "vkSignalSemaphore");
}

VkResult Gpu::signal(uint64_t value) {
  VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
  si.semaphore = timeline_;
  si.value = value;
  const VkResult r = api().vkSignalSemaphore(device_, &si);
  if (r == VK_SUCCESS) resumed_ = value;
  return r;
}

// What waits for the host after an abandoned step runs (on whatever the buffers hold), so that
// its fences can be waited for and the device destroyed: each wait once the GPU has signalled
// the value before it (a timeline only goes up).
void Gpu::release_waits() noexcept {
  for (uint64_t w = resumed_ + 2; w <= submitted_wait_; w += 2)
    if (wait_value(w - 1) != VK_SUCCESS || signal(w) != VK_SUCCESS) return;
}

void Gpu::wait_submitted(uint32_t n) {
  const Api& a = api();
  const VkResult r = a.vkWaitForFences(device_, n, fences_.data(), VK_TRUE, kHungNs);
  if (r == VK_TIMEOUT) fail("vulkan", "{}: a submission did not finish in 120 s", info_.name);
  check(r, "vkWaitForFences");
  check(a.vkResetFences(device_, n, fences_.data()), "vkResetFences");
}

void Gpu::flush() {
  WEFT_ASSERT(recording_);
  end_and_submit();
  start(current_ + 1);
}

void Gpu::submit() {
  WEFT_ASSERT(recording_);
  recording_ = false;
  const Api& a = api();
  const bool stamped = queries_ && !stamp_tags_.empty();
  if (stamped) {  // the end of the last span
    a.vkCmdWriteTimestamp(cmd(), VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                          static_cast<uint32_t>(stamp_tags_.size()));
    stamp_tags_.push_back(-1);
  }
  end_and_submit();
  wait_submitted(static_cast<uint32_t>(current_ + 1));
  if (stamped) {
    const auto n = static_cast<uint32_t>(stamp_tags_.size());
    std::vector<uint64_t> ticks(n);
    check(a.vkGetQueryPoolResults(device_, queries_, 0, n, n * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    const uint64_t mask = tick_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << tick_bits_) - 1;  // counters wrap
    for (uint32_t i = 0; i + 1 < n; ++i) {
      const int tag = stamp_tags_[i];
      if (tag < 0) continue;
      if (tag_seconds_.size() <= static_cast<size_t>(tag)) tag_seconds_.resize(tag + 1, 0.0);
      tag_seconds_[tag] += static_cast<double>((ticks[i + 1] - ticks[i]) & mask) * tick_seconds_;
    }
  }
}

}  // namespace weft::device::vk
