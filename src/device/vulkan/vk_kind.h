// The Vulkan device kind: --devices entries vk:N (see device_kind.h). A build without the Vulkan
// packages links no_vulkan.cpp's version instead, which says so when vk: is asked for.
#pragma once

#include "device/device_kind.h"

namespace weft::device::vk {

DeviceKind vulkan_kind();

}  // namespace weft::device::vk
