#include "model/scoring.h"

#include "core/error.h"

#include <cmath>

namespace weft::model {

SliceScore slice_score(const float* logits, Token vocab_begin, int32_t n, Token target) {
  SliceScore s;
  for (int32_t i = 0; i < n; ++i) s.max = std::max(s.max, logits[i]);
  for (int32_t i = 0; i < n; ++i) s.sum_exp += std::exp(logits[i] - s.max);  // expf, summed in double
  if (target >= vocab_begin && target - vocab_begin < n) s.target = logits[target - vocab_begin];
  return s;
}

LogSumExp merge_log_sum_exp(std::span<const SliceScore> parts) {
  LogSumExp r;
  for (const SliceScore& p : parts) r.max = std::max(r.max, p.max);
  // Each slice's sum rescaled from its own max to the largest: every factor is at most 1.
  double sum = 0;
  for (const SliceScore& p : parts)
    if (p.sum_exp > 0) sum += p.sum_exp * std::exp(static_cast<double>(p.max) - r.max);
  r.log_sum = std::log(sum);
  return r;
}

double merge_log_prob(std::span<const SliceScore> parts) {
  float target = std::numeric_limits<float>::quiet_NaN();
  for (const SliceScore& p : parts)
    if (!std::isnan(p.target)) target = p.target;
  if (std::isnan(target)) fail("model", "no vocabulary slice holds the scored token");
  return merge_log_sum_exp(parts).log_prob(target);
}

}  // namespace weft::model
