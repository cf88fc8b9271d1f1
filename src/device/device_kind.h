// A device kind as the rest of weft sees it: the `--devices` entries it owns, how it parses, names
// and creates them, and what this machine offers of it (`weft info --devices`). Each kind's folder
// fills one DeviceKind (cpu/cpu_kind.cpp, remote/remote_kind.cpp) and device_kinds.cpp lists them:
// a new kind is its folder and one line there (an explicit list: a static registrar in a static
// library is dropped by the linker when nothing else references its object file).
#pragma once

#include "device/device_spec.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::device {

// What create() needs beyond its spec: settings of the whole --devices list.
struct CreateContext {
  bool map_weights = false;    // see CpuDeviceOptions
  bool repack_mapped = false;  // see CpuDeviceOptions
  bool spin = true;            // every thread computing in this process has a core of its own
  int cores = 1;               // this machine's cores
  int next_core = 0;           // cores pinned so far, in --devices order (a kind that pins advances it)
  int index = 0;               // this device's ordinal among the devices of its kind ("cpu:<index>")
};

// One line each; every member is set (a kind with nothing to say returns "" or 0).
struct DeviceKind {
  DeviceSpec::Kind kind;
  std::string_view prefix;                          // an entry starting with it is this kind's ("cpu", "tcp://")
  std::string_view syntax;                          // the entry's form for error messages ("cpu:THREADS[@NUMA]")
  bool local;                                       // computes on this machine: `weft worker --devices` serves it
  DeviceSpec (*parse)(const std::string& entry);    // throws weft::Error("cli", ...) naming entry
  std::string (*describe)(const DeviceSpec& spec);  // parse(describe(s)) gives s back
  int (*host_threads)(const DeviceSpec& spec);      // threads it computes with in this process
  double (*default_ratio)(const DeviceSpec& spec);  // its share of a split without -ts (see default_ratios)
  std::unique_ptr<Device> (*create)(const DeviceSpec& spec, CreateContext& ctx);
  DeviceMemory (*memory)(const DeviceSpec& spec);  // Device::memory() of its device, without creating it
  std::string (*list_local)();                     // what this machine offers, lines ending in '\n'
};

// Every kind this build has, in the order `weft info --devices` lists them.
const std::vector<DeviceKind>& device_kinds();
const DeviceKind& device_kind(DeviceSpec::Kind kind);

// An integer field of an entry, checked to lie in lo..hi; throws naming the entry.
int parse_spec_int(std::string_view s, const std::string& entry, int lo, int hi);

}  // namespace weft::device
