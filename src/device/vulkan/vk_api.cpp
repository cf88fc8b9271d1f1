#include "device/vulkan/vk_api.h"

#include "core/error.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace weft::device::vk {
namespace {

std::atomic<int> g_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* d, void*) {
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
  g_messages.fetch_add(1);
  fmt::print(stderr, "vulkan validation: {}\n", d && d->pMessage ? d->pMessage : "(no message)");
  return VK_FALSE;
}

bool has_layer(const Api& a, const char* name) {
  uint32_t n = 0;
  a.vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  a.vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

Instance create() {
  Instance in;
  // The loader stays open for the life of the process (drivers keep threads and state in it).
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    fail("vulkan",
         "no Vulkan loader (libvulkan.so.1: {}); install libvulkan1 and a driver (mesa-vulkan-drivers "
         "for the software device)",
         dlerror());
  Api& a = in.api;
  a.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!a.vkGetInstanceProcAddr) fail("vulkan", "libvulkan.so.1 has no vkGetInstanceProcAddr");
#define WEFT_VK_LOAD_GLOBAL(f) a.f = reinterpret_cast<PFN_##f>(a.vkGetInstanceProcAddr(VK_NULL_HANDLE, #f));
  WEFT_VK_GLOBAL_FNS(WEFT_VK_LOAD_GLOBAL)
#undef WEFT_VK_LOAD_GLOBAL
  if (!a.vkCreateInstance) fail("vulkan", "the Vulkan loader gives no vkCreateInstance");

  const char* env = std::getenv("WEFT_VK_VALIDATION");
  in.validation = env && std::strcmp(env, "1") == 0;
  const char* layer = "VK_LAYER_KHRONOS_validation";
  if (in.validation && !has_layer(a, layer))
    fail("vulkan", "WEFT_VK_VALIDATION=1 but {} is not installed (vulkan-validationlayers)", layer);

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "weft";
  app.pEngineName = "weft";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  if (in.validation) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = &layer;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &ext;
    ci.pNext = &features;
  }
  check(a.vkCreateInstance(&ci, nullptr, &in.instance), "vkCreateInstance");
#define WEFT_VK_LOAD_INSTANCE(f) a.f = reinterpret_cast<PFN_##f>(a.vkGetInstanceProcAddr(in.instance, #f));
  WEFT_VK_INSTANCE_FNS(WEFT_VK_LOAD_INSTANCE)
#undef WEFT_VK_LOAD_INSTANCE
  if (in.validation && a.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = on_message;
    VkDebugUtilsMessengerEXT messenger;  // lives as long as the instance: the process
    check(a.vkCreateDebugUtilsMessengerEXT(in.instance, &mi, nullptr, &messenger), "vkCreateDebugUtilsMessengerEXT");
  }
  return in;
}

}  // namespace

const Instance& instance() {
  // Created once; a failure is remembered and rethrown (no second dlopen of a broken stack).
  static std::once_flag once;
  static Instance in;
  static std::string error;
  std::call_once(once, [] {
    try {
      in = create();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) fail("vulkan", "{}", error);
  return in;
}

const Api& api() { return instance().api; }

int validation_messages() { return g_messages.load(); }

std::string_view result_name(VkResult r) {
  switch (r) {
#define WEFT_VK_RESULT(x) \
  case x: return #x;
    WEFT_VK_RESULT(VK_SUCCESS)
    WEFT_VK_RESULT(VK_NOT_READY)
    WEFT_VK_RESULT(VK_TIMEOUT)
    WEFT_VK_RESULT(VK_INCOMPLETE)
    WEFT_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    WEFT_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    WEFT_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    WEFT_VK_RESULT(VK_ERROR_DEVICE_LOST)
    WEFT_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    WEFT_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    WEFT_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    WEFT_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    WEFT_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    WEFT_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    WEFT_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    WEFT_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    WEFT_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
#undef WEFT_VK_RESULT
    default: return "VkResult";
  }
}

void check(VkResult r, std::string_view what) {
  if (r != VK_SUCCESS) fail("vulkan", "{}: {} ({})", what, result_name(r), static_cast<int>(r));
}

}  // namespace weft::device::vk
