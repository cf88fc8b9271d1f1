#include "runtime/balance.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace weft::runtime {

namespace {
// Below a steady clock's useful resolution: a device timed at less is timed at this.
constexpr double kMinSeconds = 1e-6;
// Ratios are given in thousandths: enough to place every quant block of a 4096-wide matrix, short
// enough to read (and to paste back as -ts).
constexpr int64_t kUnits = 1000;
}  // namespace

double device_speed(const DeviceTiming& t) {
  if (t.decode_bytes == 0) return 0;
  return static_cast<double>(t.decode_bytes) / std::max(t.compute_s, kMinSeconds);
}

std::vector<double> ratios_from_speeds(std::span<const double> speeds, double min_share) {
  const size_t n = speeds.size();
  size_t n_fast = 0;  // devices with a positive speed
  for (double s : speeds) {
    if (!std::isfinite(s) || s < 0) fail("runtime", "a device speed of {} (not a number >= 0)", s);
    n_fast += s > 0;
  }
  if (n_fast == 0) fail("runtime", "no device has a measured speed above 0: nothing to split by");
  const double floor = std::min(std::max(min_share, 0.0), 1.0 / static_cast<double>(n_fast));

  // Shares by speed; a device under the floor is raised to it and the others share what is left by
  // speed, until none is under (each round raises one at least, so this ends).
  std::vector<bool> raised(n, false);
  std::vector<double> share(n, 0.0);
  for (bool again = true; again;) {
    again = false;
    double free_speed = 0;
    size_t n_raised = 0;
    for (size_t i = 0; i < n; ++i) {
      if (speeds[i] <= 0) continue;
      if (raised[i])
        ++n_raised;
      else
        free_speed += speeds[i];
    }
    const double rest = 1.0 - floor * static_cast<double>(n_raised);
    for (size_t i = 0; i < n; ++i) {
      if (speeds[i] <= 0) continue;
      share[i] = raised[i] ? floor : rest * speeds[i] / free_speed;
      if (!raised[i] && share[i] < floor) raised[i] = again = true;
    }
  }

  // Whole thousandths summing to exactly kUnits: each rounded down, then the largest remainders
  // (the lower index first among equal ones) get one more.
  std::vector<int64_t> units(n);
  std::vector<double> rest(n);
  int64_t left = kUnits;
  for (size_t i = 0; i < n; ++i) {
    const double exact = share[i] * kUnits;
    units[i] = static_cast<int64_t>(std::floor(exact + 1e-9));             // 20.000000001 or 19.999999999 -> 20
    rest[i] = speeds[i] > 0 ? exact - static_cast<double>(units[i]) : -1;  // a device of speed 0 stays at 0
    left -= units[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rest[a] > rest[b]; });
  for (size_t k = 0; left > 0; k = (k + 1) % n)
    if (speeds[order[k]] > 0) {
      ++units[order[k]];
      --left;
    }
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(units[i]) / kUnits;
  return out;
}

double max_share_change(std::span<const double> a, std::span<const double> b) {
  WEFT_ASSERT(a.size() == b.size());
  const double sa = std::accumulate(a.begin(), a.end(), 0.0), sb = std::accumulate(b.begin(), b.end(), 0.0);
  WEFT_ASSERT(sa > 0 && sb > 0);
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(a[i] / sa - b[i] / sb));
  return most;
}

double straggler_lag(std::span<const DeviceTiming> t, size_t* slowest) {
  size_t worst = std::numeric_limits<size_t>::max(), n_active = 0;
  double total = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].decode_bytes == 0) continue;
    ++n_active;
    const double s = std::max(t[i].compute_s, kMinSeconds);
    total += s;
    if (worst == std::numeric_limits<size_t>::max() || s > std::max(t[worst].compute_s, kMinSeconds)) worst = i;
  }
  if (slowest) *slowest = n_active >= 2 ? worst : std::numeric_limits<size_t>::max();
  if (n_active < 2) return 0;
  const double max_s = std::max(t[worst].compute_s, kMinSeconds);
  const double mean_others = (total - max_s) / static_cast<double>(n_active - 1);
  return max_s / mean_others - 1.0;
}

void StepTimes::add(std::span<const double> compute_s) {
  WEFT_ASSERT(steps_.empty() || steps_.front().size() == compute_s.size());
  steps_.emplace_back(compute_s.begin(), compute_s.end());
}

std::vector<double> StepTimes::medians() const {
  if (steps_.empty()) return {};
  std::vector<double> out(steps_.front().size());
  std::vector<double> column(steps_.size());
  for (size_t d = 0; d < out.size(); ++d) {
    for (size_t k = 0; k < steps_.size(); ++k) column[k] = steps_[k][d];
    const auto mid = column.begin() + static_cast<std::ptrdiff_t>((column.size() - 1) / 2);
    std::nth_element(column.begin(), mid, column.end());
    out[d] = *mid;
  }
  return out;
}

std::vector<double> rebalanced_ratios(std::span<const DeviceTiming> t, std::span<const double> current,
                                      const RebalancePolicy& policy) {
  size_t slowest = 0;
  const double lag = straggler_lag(t, &slowest);
  if (slowest >= t.size() || lag < policy.lag) return {};  // fewer than two devices at work, or close enough
  std::vector<double> speeds;
  for (const DeviceTiming& d : t) speeds.push_back(device_speed(d));
  std::vector<double> next = ratios_from_speeds(speeds);
  if (max_share_change(next, current) < policy.min_change) return {};
  return next;
}

}  // namespace weft::runtime
