// Activation buffers of a device graph, planned once at load: every node gets a buffer, reused once
// its last reader has run; an elementwise op that is the last reader of its first input writes over
// it (no copy, less memory traffic). Kind-neutral: a device allocates the buffers where it computes.
#pragma once

#include "parallel/plan.h"

#include <cstddef>
#include <vector>

namespace weft::device {

struct BufferPlan {
  std::vector<int> node_buffer;       // per node: its output buffer
  std::vector<size_t> buffer_floats;  // per buffer: capacity in floats
};

// Whether op may write its output over its first input (elementwise, same width).
bool runs_in_place(parallel::LocalOp op);

BufferPlan plan_buffers(const parallel::DeviceGraph& graph, int32_t max_tokens);

}  // namespace weft::device
