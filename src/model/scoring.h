// Log-probabilities of given next tokens (perplexity) without gathering the logits, in the two
// stages sampling uses: each device reduces a row of its vocabulary slice to three numbers, the
// coordinator merges them. The terms are llama-perplexity's (its log_softmax: the largest logit in
// float, the sum of expf(logit - largest) in double), so one device gives its numbers exactly.
#pragma once

#include "core/token.h"

#include <cstdint>
#include <limits>
#include <span>

namespace weft::model {

struct SliceScore {
  float max = -std::numeric_limits<float>::infinity();     // largest logit of the slice (-inf: empty slice)
  double sum_exp = 0;                                      // sum of expf(logit - max) over the slice
  float target = std::numeric_limits<float>::quiet_NaN();  // the target's logit; NaN: in another slice
};

// Stage 1, on a device: logits of vocab ids [vocab_begin, vocab_begin + n).
SliceScore slice_score(const float* logits, Token vocab_begin, int32_t n, Token target);

// Stage 2, on the coordinator: log p(target) from every slice's terms; a weft::Error when no
// slice holds the target (an id outside the vocabulary).
double merge_log_prob(std::span<const SliceScore> parts);

// The whole vocabulary's log-sum-exp from every slice's max and sum_exp (targets ignored), kept as
// its two terms so that log p(x) = (logit(x) - max) - log_sum, the difference taken in float first
// as llama-perplexity's log_softmax does: one device gives llama.cpp's numbers exactly.
struct LogSumExp {
  float max = -std::numeric_limits<float>::infinity();
  double log_sum = 0;
  double log_prob(float logit) const { return static_cast<double>(logit - max) - log_sum; }
};
LogSumExp merge_log_sum_exp(std::span<const SliceScore> parts);

}  // namespace weft::model
