// Expected time of one decode step of a plan, from what the hardware can do: each device streams
// its weights at its read speed (decode reads every weight once per step, whatever the batch),
// and each collective costs message latencies plus bytes over the link. Pure arithmetic on the
// Plan, so `weft plan` can show which split a network favours without running a model.
//
// Collectives follow SyncAllReduce (gloo_all_reduce.h): a payload of at most one message goes to
// every peer at once (one latency); a larger one takes a ring, 2 (N - 1) hops of messages.
// A layer split hands the residual stream from device to device through the coordinator (two
// transfers per boundary), and the devices run one after another (one sequence keeps one device
// busy at a time). Either split pays the coordinator's step message and each reply: one round trip
// per step (tensor: to every device at once), one per device (layer).
#pragma once

#include "parallel/gloo_group.h"
#include "parallel/plan.h"
#include "parallel/wire_type.h"

#include <cstddef>
#include <vector>

namespace weft::parallel {

struct LinkCost {
  double latency_s = 30e-6;     // one message: one way plus the receiver's wake-up
  double bytes_per_s = 1.25e9;  // per direction (10 Gbit/s)
  size_t message_bytes = kSyncChunkBytes;
};

struct StepCost {
  double compute_s = 0;   // tensor: the slowest device; layer: the devices in turn
  double link_s = 0;      // control, collectives or hand-offs on the critical path
  int messages = 0;       // message latencies paid per step
  double wire_bytes = 0;  // bytes one rank sends per step (tensor) / the hand-offs (layer)
  double total_s() const { return compute_s + link_s; }
};

// read_bytes_per_s: one per device of the plan. n_tokens: tokens in the step (batched decode).
StepCost estimate_decode_step(const Plan& plan, const std::vector<double>& read_bytes_per_s, const LinkCost& link,
                              WireType wire, int n_tokens = 1);

// One all-reduce of `bytes` per rank over n ranks on `link` (SyncAllReduce's algorithm).
StepCost all_reduce_cost(size_t bytes, int n_ranks, const LinkCost& link);

}  // namespace weft::parallel
