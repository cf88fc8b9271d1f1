// Per-device timing report on stderr, shared by `run --profile` and `bench`.
#pragma once

#include "runtime/engine.h"

#include <vector>

namespace weft::cli {

// One line per device: steps, compute and collective time per step; with per_op, the time of
// each op kind per step and its share of the step. With `since` (stats_of(engine) taken earlier),
// only the steps run after it.
void print_device_report(const runtime::Engine& engine, bool per_op,
                         const std::vector<device::DeviceStats>& since = {});
// Every device's stats now, in engine.devices() order.
std::vector<device::DeviceStats> stats_of(const runtime::Engine& engine);

}  // namespace weft::cli
