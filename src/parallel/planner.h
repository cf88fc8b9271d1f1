// The split planner: a pure function (graph, weights' types and shapes, ratios) -> Plan.
// No I/O, no weights, no threads: tested on synthetic graphs without running a model.
#pragma once

#include "parallel/plan.h"

#include <string>
#include <vector>

namespace weft::parallel {

// Tensor parallel (Megatron): matmuls on a replicated input are split by output features
// (column-parallel: Q/K/V, gate/up, logits by vocabulary), matmuls on a split input by input
// features (row-parallel: attention output, down) and yield a partial sum that one all-reduce
// completes: two all-reduces per dense layer. Attention and the KV cache are split by heads, whole
// GQA groups per device while there are at least as many KV heads as devices.
// ratios: one weight >= 0 per device (llama.cpp's --tensor-split), at least one > 0.
// Mixture-of-experts layers need one all-reduce, after the weighted sum of the experts (and the
// shared expert's output), however `moe` cuts the experts (see choose_moe_split for Auto):
//   Tensor: every expert's gate/up column-parallel and down row-parallel, on quant blocks;
//   Expert: whole experts per device, contiguous, in proportion to the ratios; each device runs
//           the token slots routed to the experts it holds and adds nothing for the others.
// The router and the top-k run whole on every device (n_expert values per token); the shared
// expert is split like a dense FFN.
Plan plan_tensor(const graph::Graph& g, const graph::WeightTable& weights, const std::vector<double>& ratios,
                 MoeSplit moe = MoeSplit::Auto);

// Layer (pipeline) split: device d holds whole layers, contiguous, in proportion to ratios; the
// residual stream is handed from one device to the next.
Plan plan_layers(const graph::Graph& g, const graph::WeightTable& weights, const std::vector<double>& ratios);

// Dispatch on mode; None is tensor split over one device.
Plan make_plan(SplitMode mode, const graph::Graph& g, const graph::WeightTable& weights,
               const std::vector<double>& ratios, MoeSplit moe = MoeSplit::Auto);

// Resolves Auto: tensor split, whose every device reads its share of each selected expert, so
// decode stays balanced whatever the router picks; expert split only where quant blocks cut the
// expert width too coarsely to follow the ratios and whole experts follow them better. `why`
// gets the reason in words (for weft plan).
MoeSplit choose_moe_split(const graph::Graph& g, const graph::WeightTable& weights, const std::vector<double>& ratios,
                          MoeSplit requested, std::string* why = nullptr);

// Cuts n_units into contiguous runs proportional to ratios (cumulative rounding: each device is
// within one unit of its exact share).
std::vector<Range> proportional_ranges(int64_t n_units, const std::vector<double>& ratios);

}  // namespace weft::parallel
