// Self-balancing ratios on the engine: -ts auto's measurement at load, and --rebalance's watch of
// every step. The decisions are balance.h's pure functions; the re-plan is device_loss.cpp's.
#include "runtime/calibration.h"

#include "runtime/engine.h"
#include "runtime/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace weft::runtime {

using Clock = std::chrono::steady_clock;

namespace {
// The first steps on fresh devices fault in their buffers and KV cache: not timed.
constexpr int kWarmSteps = 2;

struct Totals {
  double step_s = 0, compute_s = 0;
};
Totals totals(const device::Device& d) {
  const device::DeviceStats s = d.stats();
  return {s.step_seconds, s.step_seconds - s.collective_seconds};
}
}  // namespace

std::string ratios_flag(const std::vector<double>& ratios) {
  std::string out;  // chosen ratios are thousandths: exact in 4 digits; a split by threads may not be
  for (double r : ratios) out += fmt::format("{}{:.4g}", out.empty() ? "" : ",", r);
  return out;
}

std::vector<double> Engine::compute_seconds() const {
  std::vector<double> out;
  for (const auto& d : devices_) out.push_back(totals(*d).compute_s);
  return out;
}

// Decode steps as generation runs them (one token of slot 0, candidates back) at positions 0, 1, ...
// of slot 0; the next real step there writes from its own position on, so they leave nothing behind.
Calibration Engine::measure(int n_steps) {
  const size_t n = devices_.size();
  const int total = std::min(kWarmSteps + std::max(n_steps, 0), opt_.n_ctx);
  StepTimes compute, link;
  std::vector<Totals> before(n);
  for (size_t i = 0; i < n; ++i) before[i] = totals(*devices_[i]);
  for (int k = 0; k < total; ++k) {
    const auto token = static_cast<Token>(k % config_.dims.n_vocab);
    const auto t0 = Clock::now();
    run_step(device::Step::single({token}, k));
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> cs(n), ls(n);
    for (size_t i = 0; i < n; ++i) {
      const Totals after = totals(*devices_[i]);
      cs[i] = after.compute_s - before[i].compute_s;
      // A layer split steps its devices one after another: the wall time is theirs together, no link's.
      ls[i] = plan_.mode == parallel::SplitMode::Layer ? 0 : std::max(0.0, wall - (after.step_s - before[i].step_s));
      before[i] = after;
    }
    if (k < kWarmSteps) continue;
    compute.add(cs);
    link.add(ls);
  }
  Calibration c;
  c.steps = static_cast<int>(compute.steps());
  if (c.steps == 0) return c;
  const std::vector<double> cm = compute.medians(), lm = link.medians();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bytes = plan_.devices[i].decode_bytes;
    c.devices.push_back({devices_[i]->name(), devices_[i]->threads(), plan_.ratios[i], bytes, cm[i] * 1e3, lm[i] * 1e3,
                         device_speed({bytes, cm[i]})});
  }
  return c;
}

void Engine::calibrate() {
  Calibration c = measure(opt_.calibration_steps);
  if (c.steps == 0) {
    report("-ts auto: no step timed (-c {}, {} asked for); keeping the ratios {}", opt_.n_ctx, opt_.calibration_steps,
           ratios_flag(plan_.ratios));
    calibration_ = std::move(c);
    return;
  }
  std::vector<double> speeds;
  std::string line;
  for (const DeviceMeasure& m : c.devices) {
    speeds.push_back(m.speed);
    line += fmt::format("{}{} ({} thread{}, share {:.3f}): compute {:.3f} ms/step, {:.2f} GB/s, link {:.3f} ms",
                        line.empty() ? "" : "; ", m.name, m.threads, m.threads == 1 ? "" : "s", m.share, m.compute_ms,
                        m.speed / 1e9, m.link_ms);
  }
  report("calibration over {} decode steps: {}", c.steps, line);
  c.ratios = ratios_from_speeds(speeds);
  // What they would plan: a device its memory caps keeps the share it has however fast it is.
  const double change = max_share_change(fitted_plan(c.ratios).ratios, plan_.ratios);
  c.replanned = devices_.size() > 1 && change >= opt_.rebalance.min_change;
  report("-ts auto: ratios {} ({})", ratios_flag(c.ratios),
         c.replanned ? "re-planning" : fmt::format("within {:.3f} of the split measured: kept", change));
  calibration_ = c;
  if (c.replanned) replan_with(std::move(c.ratios));
}

// --rebalance: each step's compute time per device joins the window; a full window is judged by
// rebalanced_ratios and, when a device lags, the split is re-planned with the ratios it implies.
void Engine::observe_step() {
  if (!opt_.rebalance.enabled || devices_.size() < 2) return;
  std::vector<double> now = compute_seconds();
  if (compute_base_.size() != now.size()) {  // the first step on these devices sets the baseline
    compute_base_ = std::move(now);
    return;
  }
  std::vector<double> step(now.size());
  for (size_t i = 0; i < now.size(); ++i) step[i] = now[i] - compute_base_[i];
  compute_base_ = std::move(now);
  step_times_.add(step);
  if (step_times_.steps() < static_cast<size_t>(std::max(opt_.rebalance.window, 1))) return;
  const std::vector<double> med = step_times_.medians();
  step_times_.clear();
  std::vector<DeviceTiming> t;
  for (size_t i = 0; i < med.size(); ++i) t.push_back({plan_.devices[i].decode_bytes, med[i]});
  std::vector<double> next = rebalanced_ratios(t, plan_.ratios, opt_.rebalance);
  // A straggler given all its memory holds already: the split the new ratios plan is this one.
  if (next.empty() || max_share_change(fitted_plan(next).ratios, plan_.ratios) < opt_.rebalance.min_change) return;
  size_t slowest = 0;
  const double lag = straggler_lag(t, &slowest);
  ++rebalances_;
  report("rebalance: {} lags the others by {:.0f}% (median compute {:.3f} ms/step over {} steps); ratios {} -> {}",
         devices_[slowest]->name(), lag * 100, med[slowest] * 1e3, opt_.rebalance.window, ratios_flag(plan_.ratios),
         ratios_flag(next));
  replan_with(std::move(next));
}

}  // namespace weft::runtime
