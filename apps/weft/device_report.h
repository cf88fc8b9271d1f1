// Per-device timing report on stderr, shared by `run --profile` and `bench`.
#pragma once

#include "runtime/engine.h"

namespace weft::cli {

// One line per device: steps, compute and collective time per step; with per_op, the time of
// each op kind per step and its share of the step.
void print_device_report(const runtime::Engine& engine, bool per_op);

}  // namespace weft::cli
