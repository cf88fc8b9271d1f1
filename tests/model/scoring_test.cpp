// Log-probabilities merged from vocabulary slices equal the log-softmax of the whole row.
#include "model/scoring.h"

#include "core/error.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace weft::model {
namespace {

TEST(Scoring, SlicesMergeToTheWholeRowsLogSoftmax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> logit(0.f, 4.f);
  std::vector<float> row(1000);
  for (float& l : row) l = logit(rng);
  for (Token target : {0, 17, 499, 500, 999}) {
    double max = row[0], sum = 0;
    for (float l : row) max = std::max(max, double(l));
    for (float l : row) sum += std::exp(double(l) - max);
    const double want = double(row[target]) - max - std::log(sum);
    // One slice: llama-perplexity's own formula; three uneven ones and an empty one merged.
    const SliceScore whole = slice_score(row.data(), 0, 1000, target);
    EXPECT_NEAR(merge_log_prob(std::vector<SliceScore>{whole}), want, 1e-5);
    const std::vector<SliceScore> parts = {
        slice_score(row.data(), 0, 100, target), slice_score(row.data() + 100, 100, 0, target),
        slice_score(row.data() + 100, 100, 600, target), slice_score(row.data() + 700, 700, 300, target)};
    EXPECT_NEAR(merge_log_prob(parts), want, 1e-5) << target;
    EXPECT_LT(merge_log_prob(parts), 0);
  }
  EXPECT_ERROR(merge_log_prob(std::vector<SliceScore>{slice_score(row.data(), 0, 10, 50)}),
               "no vocabulary slice holds the scored token");
}

}  // namespace
}  // namespace weft::model
