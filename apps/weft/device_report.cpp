#include "apps/weft/device_report.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace weft::cli {
namespace {

device::DeviceStats minus(device::DeviceStats a, const device::DeviceStats& b) {
  if (b.steps > a.steps) return a;  // a device made afresh since (a re-plan): all of its steps
  for (size_t op = 0; op < a.op_seconds.size(); ++op) a.op_seconds[op] -= b.op_seconds[op];
  a.collective_seconds -= b.collective_seconds;
  a.step_seconds -= b.step_seconds;
  a.steps -= b.steps;
  a.served_seconds -= b.served_seconds;
  a.round_trip_seconds -= b.round_trip_seconds;
  return a;
}

}  // namespace

std::vector<device::DeviceStats> stats_of(const runtime::Engine& engine) {
  std::vector<device::DeviceStats> out;
  for (const auto& d : engine.devices()) out.push_back(d->stats());
  return out;
}

void print_device_report(const runtime::Engine& engine, bool per_op, const std::vector<device::DeviceStats>& since) {
  for (size_t i = 0; i < engine.devices().size(); ++i) {
    const auto& d = engine.devices()[i];
    const auto s = i < since.size() ? minus(d->stats(), since[i]) : d->stats();
    if (s.steps == 0) continue;
    const double per_step = 1e3 / static_cast<double>(s.steps);
    std::fprintf(stderr, "%s: %llu steps, compute %.3f ms/step, collectives %.3f ms/step", d->name().c_str(),
                 static_cast<unsigned long long>(s.steps), (s.step_seconds - s.collective_seconds) * per_step,
                 s.collective_seconds * per_step);
    if (s.round_trip_seconds > 0)  // a remote device: the rest of the coordinator's wait, split in two
      std::fprintf(stderr, ", worker overhead %.3f ms/step, link and coordinator %.3f ms/step",
                   (s.served_seconds - s.step_seconds) * per_step,
                   (s.round_trip_seconds - s.served_seconds) * per_step);
    std::fprintf(stderr, "\n");
    if (!per_op) continue;
    double in_ops = 0;
    for (size_t op = 0; op < s.op_seconds.size(); ++op) {
      if (s.op_seconds[op] <= 0) continue;
      in_ops += s.op_seconds[op];
      const std::string name(parallel::local_op_name(static_cast<parallel::LocalOp>(op)));
      std::fprintf(stderr, "  %-12s %8.3f ms/step  %5.1f%%\n", name.c_str(), s.op_seconds[op] * per_step,
                   100.0 * s.op_seconds[op] / std::max(s.step_seconds, 1e-12));
    }
    // The step outside every op: its setup and results on the host, and on a GPU (op times are
    // GPU times there) recording, submission and waits.
    if (in_ops > 0 && s.step_seconds > in_ops)
      std::fprintf(stderr, "  %-12s %8.3f ms/step  %5.1f%%\n", "(no op)", (s.step_seconds - in_ops) * per_step,
                   100.0 * (s.step_seconds - in_ops) / s.step_seconds);
  }
}

}  // namespace weft::cli
