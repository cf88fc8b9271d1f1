// The CPU device kind: `cpu`, `cpu:THREADS`, `cpu:THREADS@NUMA` (see device_kind.h).
#pragma once

#include "device/device_kind.h"

namespace weft::device {

DeviceKind cpu_kind();

}  // namespace weft::device
