#include "apps/weft/device_report.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace weft::cli {

void print_device_report(const runtime::Engine& engine, bool per_op) {
  for (const auto& d : engine.devices()) {
    const auto s = d->stats();
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
    for (size_t op = 0; op < s.op_seconds.size(); ++op) {
      if (s.op_seconds[op] <= 0) continue;
      const std::string name(parallel::local_op_name(static_cast<parallel::LocalOp>(op)));
      std::fprintf(stderr, "  %-12s %8.3f ms/step  %5.1f%%\n", name.c_str(), s.op_seconds[op] * per_step,
                   100.0 * s.op_seconds[op] / std::max(s.step_seconds, 1e-12));
    }
  }
}

}  // namespace weft::cli
