// The split planner: a pure function (graph, weights' types and shapes, ratios) -> Plan.
// No I/O, no weights, no threads: tested on synthetic graphs without running a model.
#pragma once

#include "parallel/plan.h"

#include <vector>

namespace weft::parallel {

// Tensor parallel (Megatron): matmuls on a replicated input are split by output features
// (column-parallel: Q/K/V, gate/up, logits by vocabulary), matmuls on a split input by input
// features (row-parallel: attention output, down) and yield a partial sum that one all-reduce
// completes: two all-reduces per dense layer. Attention and the KV cache are split by heads, whole
// GQA groups per device while there are at least as many KV heads as devices.
// ratios: one weight >= 0 per device (llama.cpp's --tensor-split), at least one > 0.
Plan plan_tensor(const graph::Graph& g, const graph::WeightTable& weights, const std::vector<double>& ratios);

// Layer (pipeline) split: device d holds whole layers, contiguous, in proportion to ratios; the
// residual stream is handed from one device to the next.
Plan plan_layers(const graph::Graph& g, const graph::WeightTable& weights, const std::vector<double>& ratios);

// Dispatch on mode; None is tensor split over one device.
Plan make_plan(SplitMode mode, const graph::Graph& g, const graph::WeightTable& weights,
               const std::vector<double>& ratios);

// Cuts n_units into contiguous runs proportional to ratios (cumulative rounding: each device is
// within one unit of its exact share).
std::vector<Range> proportional_ranges(int64_t n_units, const std::vector<double>& ratios);

}  // namespace weft::parallel
