// The remote device kind: `tcp://HOST:PORT`, a `weft worker` process (see device_kind.h).
#pragma once

#include "device/device_kind.h"

namespace weft::device::remote {

DeviceKind remote_kind();

}  // namespace weft::device::remote
