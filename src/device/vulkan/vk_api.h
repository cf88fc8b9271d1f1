// The Vulkan API as weft calls it: the loader (libvulkan.so.1) opened at run time, so a weft built
// with Vulkan still runs where no loader is installed and says so only when a vk: device is asked
// for, and every entry point weft uses, resolved once.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string_view>

namespace weft::device::vk {

#define WEFT_VK_GLOBAL_FNS(X)           \
  X(vkCreateInstance)                   \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define WEFT_VK_INSTANCE_FNS(X)               \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkCreateDebugUtilsMessengerEXT)           \
  X(vkDestroyDebugUtilsMessengerEXT)          \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkResetCommandBuffer)                     \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdFillBuffer)                          \
  X(vkCreateQueryPool)                        \
  X(vkDestroyQueryPool)                       \
  X(vkCmdResetQueryPool)                      \
  X(vkCmdWriteTimestamp)                      \
  X(vkGetQueryPoolResults)                    \
  X(vkQueueSubmit)                            \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkWaitForFences)                          \
  X(vkResetFences)                            \
  X(vkCreateSemaphore)                        \
  X(vkDestroySemaphore)                       \
  X(vkWaitSemaphores)                         \
  X(vkSignalSemaphore)                        \
  X(vkGetSemaphoreCounterValue)               \
  X(vkDeviceWaitIdle)

struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define WEFT_VK_DECLARE(f) PFN_##f f = nullptr;
  WEFT_VK_GLOBAL_FNS(WEFT_VK_DECLARE)
  WEFT_VK_INSTANCE_FNS(WEFT_VK_DECLARE)
#undef WEFT_VK_DECLARE
};

// The process's instance and API, created on first use; throws weft::Error("vulkan", ...) when no
// loader or no instance can be had. With WEFT_VK_VALIDATION=1 in the environment the Khronos
// validation layer runs, synchronisation validation included, and every message it sends is
// printed and counted (validation_messages).
struct Instance {
  Api api;
  VkInstance instance = VK_NULL_HANDLE;
  bool validation = false;
};
const Instance& instance();
const Api& api();
int validation_messages();

// Throws weft::Error("vulkan", "<what>: <result name>") unless r is VK_SUCCESS.
void check(VkResult r, std::string_view what);
std::string_view result_name(VkResult r);

}  // namespace weft::device::vk
