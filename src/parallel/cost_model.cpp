#include "parallel/cost_model.h"

#include "core/error.h"

#include <algorithm>

namespace weft::parallel {

StepCost all_reduce_cost(size_t bytes, int n_ranks, const LinkCost& link) {
  StepCost c;
  if (n_ranks <= 1 || bytes == 0) return c;
  const double n = n_ranks;
  if (bytes <= link.message_bytes) {  // to every peer at once: one latency, N - 1 copies sent
    c.messages = 1;
    c.wire_bytes = (n - 1) * static_cast<double>(bytes);
  } else {  // ring: 2 (N - 1) hops, each a segment of bytes / N in messages
    const size_t segment = (bytes + n_ranks - 1) / n_ranks;
    const int per_hop = static_cast<int>((segment + link.message_bytes - 1) / link.message_bytes);
    c.messages = 2 * (n_ranks - 1) * per_hop;
    c.wire_bytes = 2 * (n - 1) / n * static_cast<double>(bytes);
  }
  c.link_s = c.messages * link.latency_s + c.wire_bytes / link.bytes_per_s;
  return c;
}

StepCost estimate_decode_step(const Plan& plan, const std::vector<double>& read_bytes_per_s, const LinkCost& link,
                              WireType wire, int n_tokens) {
  const size_t n = plan.devices.size();
  if (read_bytes_per_s.size() != n)
    fail("plan", "cost model: {} device speeds for {} devices", read_bytes_per_s.size(), n);
  for (double s : read_bytes_per_s)
    if (!(s > 0)) fail("plan", "cost model: a device's read speed must be > 0 bytes/s");
  WEFT_ASSERT(n_tokens >= 1 && link.latency_s >= 0 && link.bytes_per_s > 0 && link.message_bytes > 0);
  StepCost c;
  for (size_t d = 0; d < n; ++d) {
    const double t = static_cast<double>(plan.devices[d].decode_bytes) / read_bytes_per_s[d];
    c.compute_s = plan.mode == SplitMode::Layer ? c.compute_s + t : std::max(c.compute_s, t);
  }
  if (plan.mode == SplitMode::Layer) {
    const graph::Dims& dims = plan.devices.front().dims;
    const double handoff = static_cast<double>(dims.n_embd) * n_tokens * sizeof(float);
    c.messages = 2 * static_cast<int>(n);  // each device's step message and reply, in turn
    for (const DeviceGraph& dg : plan.devices)
      if (dg.passes_residual) c.wire_bytes += 2 * handoff;  // to the coordinator, on to the next
    c.link_s = c.messages * link.latency_s + c.wire_bytes / link.bytes_per_s;
    return c;
  }
  c.messages = 2;  // the step message to every device at once, their replies
  c.link_s = c.messages * link.latency_s;
  for (const CollectiveInfo& ci : plan.collectives) {
    const StepCost a = all_reduce_cost(ci.bytes_per_token(wire) * n_tokens, static_cast<int>(n), link);
    c.messages += a.messages;
    c.wire_bytes += a.wire_bytes;
    c.link_s += a.link_s;
  }
  return c;
}

}  // namespace weft::parallel
