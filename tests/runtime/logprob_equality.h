// Helpers of the log-probability equality tests (logprobs_test.cpp, vk_equality_test.cpp): a few
// steps drawn with temperature, top-k and a penalty, each asking for the top log-probabilities,
// and two such runs compared.
#pragma once

#include "model/logprobs.h"
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace weft::runtime::logprob_equality {

// Absolute, on log-probabilities: the splits' logits differ in their last float bits (summed in
// another order) and each slice's exp sum is rescaled from its own max. Measured: under 1e-5.
constexpr double kLogprobTol = 2e-5;
constexpr int kSteps = 8;

// Temperature, top-k and a repeat penalty: the drawn token is rarely the argmax, and penalised.
inline model::SamplingParams sampler() {
  model::SamplingParams p;
  p.temp = 1.2f;
  p.top_k = 40;
  p.top_p = 1.f;
  p.min_p = 0.f;
  p.repeat_penalty = 1.5f;
  return p;
}

struct Drawn {
  std::vector<Token> tokens;
  std::vector<model::TokenLogprobs> logprobs;
};

inline Drawn draw(Engine& e, const std::vector<Token>& prompt, int32_t top) {
  e.reset();
  std::mt19937_64 rng(77);
  std::vector<Token> history = prompt, feed = prompt;
  Drawn d;
  for (int i = 0; i < kSteps; ++i) {
    SeqStep q;
    q.tokens = feed;
    q.sample = true;
    q.sampling = sampler();
    q.recent = history;
    q.rng = &rng;
    q.top_logprobs = top;
    SeqOutput out = std::move(e.step_batch({&q, 1})[0]);
    EXPECT_TRUE(out.logprobs.has_value());
    if (!out.logprobs) break;
    d.tokens.push_back(out.token);
    d.logprobs.push_back(*out.logprobs);
    history.push_back(out.token);
    feed = {out.token};
  }
  return d;
}

inline void expect_same(const Drawn& a, const Drawn& b, const std::string& what, double tol = kLogprobTol) {
  ASSERT_EQ(a.tokens, b.tokens) << what;
  double worst = 0;
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    const auto &x = a.logprobs[i], &y = b.logprobs[i];
    EXPECT_EQ(x.sampled.id, y.sampled.id) << what;
    worst = std::max(worst, std::abs(x.sampled.logprob - y.sampled.logprob));
    ASSERT_EQ(x.top.size(), y.top.size()) << what;
    for (size_t j = 0; j < x.top.size(); ++j) {
      EXPECT_EQ(x.top[j].id, y.top[j].id) << what << " step " << i << " rank " << j;
      worst = std::max(worst, std::abs(x.top[j].logprob - y.top[j].logprob));
    }
  }
  EXPECT_LT(worst, tol) << what;
  std::printf("%s: worst log-probability difference %.2e\n", what.c_str(), worst);
}

}  // namespace weft::runtime::logprob_equality
