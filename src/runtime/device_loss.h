// Surviving the loss of a device mid-run (--on-device-loss replan, the default).
//
// A step whose device fails (its worker killed, its host silent past the heartbeat bound, a
// collective error of its own) leaves the devices aborted, and an aborted device is unusable. The
// engine then drops the device whose own failure it was (never one that only echoed it, see
// weft::Blame), re-plans over the others with the same pure planner and their ratios, creates and
// loads them afresh (a worker in a new session, reading its slices as any load does), runs every
// KV cache slot's tokens through them again, and runs the failed step once more. Sampling happens
// after a step returns, so a replay draws nothing and the generator stays where it was: greedy
// output is that of a run that never lost the device. The Engine members that do this live in
// device_loss.cpp; these are the pure parts.
#pragma once

#include "core/error.h"
#include "device/device_spec.h"

#include <optional>
#include <span>
#include <string>

namespace weft::runtime {

// The index in `names` of the device `e` is that device's own failure of; none for an echo of a
// peer's failure, or an error that names no device of the list.
std::optional<size_t> lost_device(const Error& e, std::span<const std::string> names);

// A worker that refused a session because its previous one (ours, just aborted) has not ended yet.
bool is_worker_busy(const Error& e);

// Whether a worker answers a handshake now (a probe: the session ended at once; bounded by
// device::remote::kProbeTimeoutMs per wait). False for a device that is no worker.
bool answers(const device::DeviceSpec& worker);

// "cpu:0 (ratio 1), tcp://10.0.0.2:7070 (ratio 2)": one re-plan's devices, for the report.
std::string describe_split(std::span<const std::string> names, std::span<const double> ratios);

}  // namespace weft::runtime
