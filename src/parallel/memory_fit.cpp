#include "parallel/memory_fit.h"

#include "core/error.h"
#include "graph/kv_window.h"

#include <cmath>

namespace weft::parallel {
namespace {

// The shares s with device i's set to x, what it gives up (or takes) spread over the devices that
// receive, in proportion to their shares. The sum stays what it was.
std::vector<double> with_share(const std::vector<double>& s, size_t i, double x, const std::vector<bool>& receives) {
  double pool = 0;
  for (size_t j = 0; j < s.size(); ++j)
    if (j != i && receives[j]) pool += s[j];
  std::vector<double> t = s;
  t[i] = x;
  for (size_t j = 0; j < s.size(); ++j)
    if (j != i && receives[j]) t[j] += (s[i] - x) * s[j] / pool;
  return t;
}

}  // namespace

uint64_t kv_cache_bytes(const DeviceGraph& g, const KvSizing& kv) {
  if (kv.positions <= 0 || kv.n_seq <= 0) return 0;
  // K and V: half each, of the full layers' values at every position and the windowed layers' at
  // their rows per slot.
  auto bytes = [&](uint64_t values, int64_t positions) {
    const auto per_cache = static_cast<int64_t>(values / 2);
    return (row_bytes(kv.k_type, per_cache) + row_bytes(kv.v_type, per_cache)) * static_cast<uint64_t>(positions);
  };
  const int64_t n_ctx = kv.positions / kv.n_seq;
  const int64_t rows = graph::kv_window_rows(n_ctx, g.dims.n_swa, kv.max_tokens);
  return bytes(g.kv_values_per_token - g.kv_window_values, kv.positions) + bytes(g.kv_window_values, rows * kv.n_seq) +
         g.state_values_per_slot * sizeof(float) * static_cast<uint64_t>(kv.n_seq + kv.checkpoints);  // f32 states
}

uint64_t device_bytes(const DeviceGraph& g, const KvSizing& kv) { return g.weight_bytes + kv_cache_bytes(g, kv); }

Plan plan_within_memory(SplitMode mode, const graph::Graph& g, const graph::WeightTable& weights,
                        const std::vector<double>& ratios, MoeSplit moe,
                        const std::vector<std::optional<uint64_t>>& limits, const KvSizing& kv) {
  WEFT_ASSERT(limits.size() == ratios.size());
  const size_t n = ratios.size();
  Plan asked = make_plan(mode, g, weights, ratios, moe);
  auto over = [&](const Plan& p, size_t i) { return limits[i] && device_bytes(p.devices[i], kv) > *limits[i]; };
  auto any_over = [&](const Plan& p) {
    for (size_t i = 0; i < n; ++i)
      if (over(p, i)) return true;
    return false;
  };
  if (n < 2 || asked.devices.size() != n || !any_over(asked)) return asked;

  std::vector<double> s = asked.ratios;  // normalised
  std::vector<bool> capped(n, false);
  Plan p = asked;
  // Each round caps every device over its limit; a device that received share may be over in the
  // next, and is capped there (it receives no more). Each round caps one device at least.
  for (size_t round = 0; round < 2 * n; ++round) {
    for (size_t i = 0; i < n; ++i) {
      if (!over(p, i)) continue;
      std::vector<bool> receives(n);
      bool anyone = false;
      for (size_t j = 0; j < n; ++j) anyone |= receives[j] = j != i && !capped[j] && s[j] > 0 && !over(p, j);
      if (!anyone) return asked;  // nobody to take what it gives up
      // The largest share in thousandths below its current one whose part fits (a part grows with
      // its share: heads, rows and layers are cut in proportion).
      auto fits = [&](int k) {
        return !over(make_plan(mode, g, weights, with_share(s, i, k / 1000.0, receives), moe), i);
      };
      int lo = 0, hi = static_cast<int>(std::ceil(s[i] * 1000)) - 1;
      if (hi < 0 || !fits(0)) return asked;  // not even what it holds at share 0 (replicated weights) fits
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (fits(mid))
          lo = mid;
        else
          hi = mid - 1;
      }
      s = with_share(s, i, lo / 1000.0, receives);
      capped[i] = true;
    }
    p = make_plan(mode, g, weights, s, moe);
    if (!any_over(p)) {
      p.asked_ratios = asked.ratios;
      return p;
    }
  }
  return asked;
}

}  // namespace weft::parallel
