// Wiring the devices of a tensor split into one group, and loading them, for any mix of device
// kinds: the engine never asks what kind a device is; choose_group decides the group's backend
// from what the devices say of themselves (Device::reach: where each computes, and its kind).
// All in this process: shared-memory collectives. Otherwise every rank, the coordinator's own CPU
// devices included, joins one network (Gloo) group through a rendezvous store this process serves
// while the ranks connect.
#pragma once

#include "device/device.h"
#include "gguf/gguf_reader.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::device {

using Devices = std::vector<std::unique_ptr<Device>>;

// The collective backends a group runs on (parallel::Group families).
enum class GroupBackend {
  SharedMemory,  // parallel::make_shm_group: every device in this process (a GPU's collectives
                 // stage through host memory, so vk devices share it with CPU devices)
  Network,       // parallel::GlooGroup: some device behind a connection; every rank joins, through
                 // a rendezvous store (ranks of one host all-reduce in host shared memory there)
};

struct GroupChoice {
  GroupBackend backend = GroupBackend::SharedMemory;
  std::string host;       // Network: the local interface that reaches the first device behind a connection
  int local_threads = 0;  // threads computing in this process (whether waits spin or busy-poll)
};

// The one place a group's backend is chosen: a pure function of each device's Reach and threads
// (same order, one entry per rank). A GPU-native collective (devices of one kind that reach each
// other's memory, say) is one more GroupBackend decided here from the kinds, and a Group backend
// beside shm_group / gloo_group; no device kind or caller changes.
GroupChoice choose_group(std::span<const Reach> reaches, std::span<const int> threads);

// Makes devices[i] rank i of one group (both join phases; waits until all have joined).
void connect_group(const Devices& devices, parallel::WireType wire, int timeout_ms = 30000);

// Loads devices[i] with graphs[i]: devices behind a connection concurrently (each worker receives
// or reads its own shard while the others do), in-process ones in turn. Waits for all; rethrows
// the first device's own failure before any failure it caused in its peers (weft::Blame).
void load_devices(const Devices& devices, const std::vector<parallel::DeviceGraph>& graphs, const gguf::File& weights,
                  const LoadOptions& opt);

}  // namespace weft::device
