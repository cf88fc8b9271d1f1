// Fitting a split into the devices' memory. Where a device can hold only so much (a GPU: a hard
// limit, known from the device or its worker), the shares weft chooses itself (no -ts, -ts auto,
// --rebalance, a re-plan after a loss) must not give it more weights and KV cache than that: its
// share is lowered until its part fits, and what it gives up goes to the devices without a limit
// reached, in proportion to their ratios. Pure, like the planner: the limits come in as data.
#pragma once

#include "core/dtype.h"
#include "parallel/planner.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace weft::parallel {

// What sizes a device's KV cache besides its plan: positions (n_ctx x n_seq) and element types.
struct KvSizing {
  int64_t positions = 0;  // n_ctx per slot x n_seq
  DType k_type = DType::F16, v_type = DType::F16;
  int64_t n_seq = 1, max_tokens = 512;  // sliding-window layers: rows per slot (graph/kv_window.h)
  int64_t checkpoints = 0;              // recurrent state slots besides the n_seq (device::LoadOptions)
};

// The KV cache of one device's graph (K and V over its layers and heads, every position).
uint64_t kv_cache_bytes(const DeviceGraph& g, const KvSizing& kv);
// What a device holds for its part of a plan: its weight slices and its KV cache (activations,
// a few MiB at most for decode, are not counted).
uint64_t device_bytes(const DeviceGraph& g, const KvSizing& kv);

// make_plan, then each device whose limit (bytes; nullopt: none) its part exceeds gets the largest
// share, in thousandths, whose part fits; the share it gives up goes to the devices not capped.
// Plan::asked_ratios then holds the ratios asked for (normalised) and ratios the shares planned.
// Where no split fits (a device over its limit with no share at all, or nobody left to take what
// it gives up) the plan is the one asked for, and loading it fails naming the device.
Plan plan_within_memory(SplitMode mode, const graph::Graph& g, const graph::WeightTable& weights,
                        const std::vector<double>& ratios, MoeSplit moe,
                        const std::vector<std::optional<uint64_t>>& limits, const KvSizing& kv);

}  // namespace weft::parallel
