// Self-balancing ratios (-ts auto, --rebalance), the pure parts: from what each device measured
// to the split ratios that make every device finish a step together.
//
// A device's speed is the weight bytes one decoded token reads from its slices (the plan's
// decode_bytes: its own slice shapes, rounding to heads and quant blocks included) over the compute
// seconds it took for them, collectives excluded: a matvec's bandwidth. Ratios proportional to the
// speeds give every device the same compute time. A link's round trip is paid once per step
// whatever the share, so it does not move the ratios (calibration reports it beside them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace weft::runtime {

// One device's measurement over some steps.
struct DeviceTiming {
  uint64_t decode_bytes = 0;  // weight bytes a decoded token reads on it (parallel::DeviceGraph)
  double compute_s = 0;       // its compute seconds per step (median), collectives excluded
};

// Bytes per second; 0 for a device that holds nothing (nothing to measure it by).
double device_speed(const DeviceTiming& t);

// Share below which a device with a positive speed is not cut (in the ratios' sum of 1): it
// keeps something to be measured by while rebalancing, and its noisy timing of almost nothing
// cannot starve it.
constexpr double kMinShare = 0.02;

// Ratios (summing to 1, in thousandths so they read and paste back as -ts) proportional to
// `speeds` (>= 0, at least one > 0, else weft::Error "runtime"): a device of speed 0 gets 0,
// one with a positive speed at least min_share (or an even share when there are too many devices
// for it).
std::vector<double> ratios_from_speeds(std::span<const double> speeds, double min_share = kMinShare);

// The largest difference of one device's share between two sets of ratios (each normalised
// first; same length).
double max_share_change(std::span<const double> a, std::span<const double> b);

// How far the slowest device lags: its compute time over the mean of the others' minus 1 (0.2:
// 20% slower). Devices that hold nothing are left out; 0 with fewer than two left. `slowest`
// gets its index.
double straggler_lag(std::span<const DeviceTiming> t, size_t* slowest = nullptr);

// When to re-plan while running (--rebalance): one device the straggler by at least `lag` over a
// window of `window` steps (per device, the median step: a stray slow step does not count), and
// the ratios it implies at least `min_change` away from the current ones.
struct RebalancePolicy {
  bool enabled = false;
  int window = 64;
  double lag = 0.15;
  double min_change = 0.02;
};

// Each device's compute seconds per step, over the steps of a window.
class StepTimes {
 public:
  void add(std::span<const double> compute_s);  // one step, one value per device
  size_t steps() const { return steps_.size(); }
  void clear() { steps_.clear(); }
  // Per device, the median over the steps added (the lower middle one for an even count).
  std::vector<double> medians() const;

 private:
  std::vector<std::vector<double>> steps_;
};

// The step that decides a rebalance: the window's timings against `policy`. Returns the new
// ratios, or nothing when the lag or the change is too small.
std::vector<double> rebalanced_ratios(std::span<const DeviceTiming> t, std::span<const double> current,
                                      const RebalancePolicy& policy);

}  // namespace weft::runtime
