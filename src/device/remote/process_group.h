// Wiring of a tensor-parallel group that spans processes. When any device is remote, every device
// — the coordinator's CPU devices included — gets a Gloo rank (shared memory cannot reach another
// process); the coordinator runs the rendezvous store only while the ranks connect.
#pragma once

#include "device/device.h"
#include "gguf/gguf_reader.h"
#include "parallel/group.h"

#include <memory>
#include <vector>

namespace weft::device::remote {

// Connects devices[i] as rank i when any of them is a RemoteDevice and returns true; returns false
// (and does nothing) when all are local, so the caller keeps its shared-memory group.
bool attach_process_group(const std::vector<std::unique_ptr<Device>>& devices, parallel::WireType wire,
                          int timeout_ms = 30000);

// Loads devices[i] with graphs[i]: remote devices concurrently, one thread each (every worker
// receives or reads its own shard while the others do), local ones in turn on this thread. Waits
// for all; the first failure (a device's own rather than one that gave up on a failed peer) is rethrown.
void load_devices(const std::vector<std::unique_ptr<Device>>& devices, const std::vector<parallel::DeviceGraph>& graphs,
                  const gguf::File& weights, const LoadOptions& opt);

}  // namespace weft::device::remote
