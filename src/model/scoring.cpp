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

double merge_log_prob(std::span<const SliceScore> parts) {
  float max = -std::numeric_limits<float>::infinity(), target = std::numeric_limits<float>::quiet_NaN();
  for (const SliceScore& p : parts) {
    max = std::max(max, p.max);
    if (!std::isnan(p.target)) target = p.target;
  }
  if (std::isnan(target)) fail("model", "no vocabulary slice holds the scored token");
  double sum = 0;
  for (const SliceScore& p : parts)
    if (p.sum_exp > 0) sum += p.sum_exp * std::exp(static_cast<double>(p.max) - max);
  // (target - max) in float first, as llama-perplexity's log_softmax does.
  return static_cast<double>(target - max) - std::log(sum);
}

}  // namespace weft::model
