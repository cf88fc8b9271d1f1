// Log-probabilities merged from vocabulary slices (log-sum-exp terms and each slice's top raw
// logits) equal a double-precision log-softmax of the whole row, ties in the order of lower ids,
// however the row is cut; the sampled token's comes from its raw logit, penalised or not.
#include "model/logprobs.h"

#include "core/error.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace weft::model {
namespace {

// The whole row's log-softmax in double and its ids in (logit desc, id asc) order.
struct Reference {
  std::vector<double> logprob;
  std::vector<Token> order;
};
Reference reference(const std::vector<float>& row) {
  double max = row[0], sum = 0;
  for (float l : row) max = std::max(max, double(l));
  for (float l : row) sum += std::exp(double(l) - max);
  Reference r;
  for (float l : row) r.logprob.push_back(double(l) - max - std::log(sum));
  r.order.resize(row.size());
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(), [&](Token a, Token b) { return row[a] > row[b]; });
  return r;
}

// Cuts row at `cuts` (ascending, inside 0..size) and runs both stages, sampling greedily.
TokenLogprobs split_and_merge(const std::vector<float>& row, const std::vector<int32_t>& cuts, int32_t n_top,
                              const SamplingParams& p, const std::vector<Token>& recent, Token sampled) {
  std::vector<SliceLogprobs> parts;
  std::vector<LocalCandidates> cands;
  int32_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const int32_t end = i < cuts.size() ? cuts[i] : static_cast<int32_t>(row.size());
    parts.push_back(slice_logprobs(row.data() + begin, begin, end - begin, n_top, p, recent));
    cands.push_back(local_candidates(row.data() + begin, begin, end - begin, p, recent));
    begin = end;
  }
  return merge_logprobs(parts, cands, sampled, n_top);
}

// Within float rounding of the slices' exp sums against the reference's double ones.
constexpr double kTol = 1e-5;

TEST(Logprobs, SlicesMergeToTheWholeRowsLogSoftmaxTiesToTheLowerId) {
  std::mt19937 rng(5);
  std::normal_distribution<float> logit(0.f, 3.f);
  std::vector<float> row(1000);
  for (float& l : row) l = logit(rng);
  // Ties across the cuts below: the largest value three times, straddling 300 and 700.
  const float top = *std::max_element(row.begin(), row.end()) + 1.f;
  row[650] = row[299] = row[901] = top;
  row[12] = row[800] = top - 0.5f;
  const Reference ref = reference(row);
  ASSERT_EQ(ref.order[0], 299);
  SamplingParams greedy;
  greedy.temp = 0;
  for (const std::vector<int32_t>& cuts : std::vector<std::vector<int32_t>>{{}, {300, 700}, {1, 1, 999}, {0, 500}})
    for (int32_t n_top : {0, 1, 5, 20}) {
      const TokenLogprobs r = split_and_merge(row, cuts, n_top, greedy, {}, 299);
      ASSERT_EQ(r.top.size(), static_cast<size_t>(n_top));
      for (int32_t i = 0; i < n_top; ++i) {
        EXPECT_EQ(r.top[i].id, ref.order[i]) << i;
        EXPECT_NEAR(r.top[i].logprob, ref.logprob[ref.order[i]], kTol) << i;
      }
      EXPECT_EQ(r.sampled.id, 299);
      EXPECT_NEAR(r.sampled.logprob, ref.logprob[299], kTol);
    }
}

TEST(Logprobs, LargeLogitsStayFinite) {
  // exp(1e4) overflows a double: the terms must stay relative to each slice's max (expf: 1e-6).
  std::vector<float> row = {1e4f, 1e4f - 1.f, -1e4f, 1e4f - 2.f, 0.f, 1e4f};
  SamplingParams greedy;
  greedy.temp = 0;
  const TokenLogprobs r = split_and_merge(row, {2, 4}, 3, greedy, {}, 0);
  const double log_sum = std::log(2 + std::exp(-1.0) + std::exp(-2.0));  // exp(0 - 1e4) is 0 in double
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].id, 0);
  EXPECT_EQ(r.top[1].id, 5);
  EXPECT_EQ(r.top[2].id, 1);
  EXPECT_NEAR(r.top[0].logprob, -log_sum, 1e-6);
  EXPECT_NEAR(r.top[2].logprob, -1 - log_sum, 1e-6);
  EXPECT_NEAR(r.sampled.logprob, -log_sum, 1e-6);
}

TEST(Logprobs, SampledTokenOutsideTheTopUsesItsRawLogitEvenWhenPenalised) {
  std::mt19937 rng(9);
  std::normal_distribution<float> logit(0.f, 2.f);
  std::vector<float> row(400);
  for (float& l : row) l = logit(rng);
  const Reference ref = reference(row);
  // Top-k sampling hands the coordinator 40 candidates; the token drawn is the 30th: outside a top 5.
  SamplingParams p;
  p.top_k = 40;
  const Token drawn = ref.order[29];
  TokenLogprobs r = split_and_merge(row, {150, 260}, 5, p, {}, drawn);
  EXPECT_NEAR(r.sampled.logprob, ref.logprob[drawn], kTol);
  // With a repeat penalty on the drawn token its candidate logit moves; its logprob must not.
  p.repeat_penalty = 1.5f;
  p.presence_penalty = 0.7f;
  r = split_and_merge(row, {150, 260}, 5, p, {drawn, ref.order[0]}, drawn);
  EXPECT_NEAR(r.sampled.logprob, ref.logprob[drawn], kTol);
  EXPECT_NEAR(r.top[0].logprob, ref.logprob[ref.order[0]], kTol);  // the top list ignores penalties too
  EXPECT_EQ(r.top[0].id, ref.order[0]);
  // A token no slice offered is an error, not a made-up number.
  SamplingParams greedy;
  greedy.temp = 0;
  EXPECT_ERROR(split_and_merge(row, {150}, 5, greedy, {}, ref.order[3]), "among no slice's candidates");
}

}  // namespace
}  // namespace weft::model
