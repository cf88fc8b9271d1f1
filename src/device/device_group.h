// Wiring the devices of a tensor split into one group, and loading them, for any mix of device
// kinds: the engine never asks what kind a device is, only where it computes (Device::reach).
// All in this process: shared-memory collectives. Otherwise every rank, the coordinator's own CPU
// devices included, joins one network (Gloo) group through a rendezvous store this process serves
// while the ranks connect.
#pragma once

#include "device/device.h"
#include "gguf/gguf_reader.h"

#include <memory>
#include <vector>

namespace weft::device {

using Devices = std::vector<std::unique_ptr<Device>>;

// Makes devices[i] rank i of one group (both join phases; waits until all have joined).
void connect_group(const Devices& devices, parallel::WireType wire, int timeout_ms = 30000);

// Loads devices[i] with graphs[i]: devices behind a connection concurrently (each worker receives
// or reads its own shard while the others do), in-process ones in turn. Waits for all; rethrows
// the first device's own failure before any failure it caused in its peers (weft::Blame).
void load_devices(const Devices& devices, const std::vector<parallel::DeviceGraph>& graphs, const gguf::File& weights,
                  const LoadOptions& opt);

}  // namespace weft::device
