// Sampling: a vocabulary split into any number of uneven slices must draw exactly the token the
// unsplit vocabulary draws; the filters cut where llama.cpp cuts; draws follow the distribution.
#include "model/sampling.h"
#include "core/error.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace weft::model {
namespace {

// Frequencies over kDraws draws: the standard error of a frequency is at most 0.5/sqrt(kDraws)
// = 0.0025, so kFreqTol is 4 standard errors.
constexpr int kDraws = 40000;
constexpr double kFreqTol = 0.01;

SamplingParams greedy() {
  SamplingParams p;
  p.temp = 0.f;
  return p;
}

// Only temperature: the plain softmax distribution.
SamplingParams plain(float temp) {
  SamplingParams p;
  p.temp = temp;
  p.top_k = 0;
  p.top_p = 1.f;
  p.min_p = 0.f;
  return p;
}

// Logits on a coarse grid so that many tokens tie: ties must break the same way in every split.
std::vector<float> tied_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-40, 12);
  std::vector<float> v(n);
  for (auto& x : v) x = 0.25f * d(rng);
  return v;
}

// Uneven slice boundaries of [0, n) into `parts` non-empty pieces.
std::vector<int> cuts(int n, int parts, uint32_t seed) {
  std::mt19937 rng(seed);
  std::set<int> s;
  while (int(s.size()) < parts - 1) s.insert(1 + int(rng() % (n - 1)));
  std::vector<int> c = {0};
  c.insert(c.end(), s.begin(), s.end());
  c.push_back(n);
  return c;
}

std::vector<LocalCandidates> split_candidates(const std::vector<float>& logits, int parts, uint32_t seed,
                                              const SamplingParams& p, std::span<const Token> recent) {
  const std::vector<int> c = cuts(int(logits.size()), parts, seed);
  std::vector<LocalCandidates> out;
  for (int i = 0; i < parts; ++i) {
    const int n = c[i + 1] - c[i];
    LocalCandidates lc = local_candidates(logits.data() + c[i], c[i], n, p, recent);
    EXPECT_EQ(int(lc.top.size()), candidates_needed(p, n));
    out.push_back(std::move(lc));
  }
  return out;
}

std::map<Token, double> frequencies(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<Token, double> f;
  for (int i = 0; i < kDraws; ++i) {
    const auto lc = local_candidates(logits.data(), 0, int32_t(logits.size()), p, {});
    f[sample({lc}, p, rng)] += 1.0 / kDraws;
  }
  return f;
}

std::vector<double> softmax_d(const std::vector<float>& l, double temp) {
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(l[i] / temp);
  for (auto& x : p) x /= s;
  return p;
}

TEST(Sampling, CandidatesNeeded) {
  EXPECT_EQ(candidates_needed(greedy(), 1000), 1);
  EXPECT_EQ(candidates_needed(greedy(), 0), 0);
  SamplingParams p;  // llama.cpp defaults: top_k 40
  EXPECT_EQ(candidates_needed(p, 1000), 40);
  EXPECT_EQ(candidates_needed(p, 7), 7);
  EXPECT_EQ(candidates_needed(plain(1.f), 1000), 1000);
}

TEST(Sampling, LocalCandidatesSortedWithIdTieBreak) {
  const std::vector<float> l = {1.f, 3.f, 2.f, 3.f, -1.f, 2.f};
  SamplingParams p = plain(1.f);
  p.top_k = 4;
  const auto lc = local_candidates(l.data(), 100, 6, p, {});
  ASSERT_EQ(lc.top.size(), 4u);
  const std::vector<Token> want = {101, 103, 102, 105};  // 3, 3, 2, 2: lower id first on ties
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(lc.top[i].id, want[i]) << i;
  EXPECT_EQ(lc.top[0].logit, 3.f);
  EXPECT_EQ(lc.top[3].logit, 2.f);
}

TEST(Sampling, PresenceAndFrequencyPenaltiesAsLlamaCpp) {
  const std::vector<float> l = {2.f, -2.f, 1.f, 0.5f, 4.f};
  SamplingParams p = plain(1.f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_penalty = 2.f;
  p.repeat_last_n = 6;  // window: {10, 11, 3, 10, 10, 11}; 14 is too old
  const std::vector<Token> recent = {14, 10, 11, 3, 10, 10, 11};
  const auto lc = local_candidates(l.data(), 10, 5, p, recent);
  std::map<Token, float> got;
  for (const auto& c : lc.top) got[c.id] = c.logit;
  EXPECT_FLOAT_EQ(got[10], 2.f / 2 - 3 * 0.25f - 0.5f);   // three times: repeat once, frequency thrice, presence once
  EXPECT_FLOAT_EQ(got[11], -2.f * 2 - 2 * 0.25f - 0.5f);  // twice
  EXPECT_EQ(got[12], 1.f);
  EXPECT_EQ(got[14], 4.f);
  p.frequency_penalty = std::nanf("");
  EXPECT_ERROR(local_candidates(l.data(), 10, 5, p, recent), "frequency_penalty nan is outside");
}

TEST(Sampling, RepeatPenaltyAsLlamaCpp) {
  const std::vector<float> l = {2.f, -2.f, 1.f, 0.5f, 4.f};
  SamplingParams p = plain(1.f);
  p.repeat_penalty = 2.f;
  // 10 and 11 repeat (once each, however often), 3 is outside the slice [10, 15), 14 is too old.
  const std::vector<Token> recent = {14, 10, 11, 3, 10, 10, 11};
  p.repeat_last_n = 6;  // window: {10, 11, 3, 10, 10, 11}
  const auto lc = local_candidates(l.data(), 10, 5, p, recent);
  std::map<Token, float> got;
  for (const auto& c : lc.top) got[c.id] = c.logit;
  EXPECT_EQ(got[10], 1.f);   // positive: divided
  EXPECT_EQ(got[11], -4.f);  // negative: multiplied
  EXPECT_EQ(got[12], 1.f);
  EXPECT_EQ(got[13], 0.5f);
  EXPECT_EQ(got[14], 4.f);  // outside the window
  p.repeat_last_n = -1;     // whole history
  const auto all = local_candidates(l.data(), 10, 5, p, recent);
  EXPECT_EQ(all.top[0].id, 14);
  EXPECT_EQ(all.top[0].logit, 2.f);
  p.repeat_penalty = 1.f;  // off
  EXPECT_EQ(local_candidates(l.data(), 10, 5, p, recent).top[0].logit, 4.f);
  // Greedy sees the penalty: token 14 drops to 4 / 3, below token 10's 2.
  SamplingParams g = greedy();
  g.repeat_penalty = 3.f;
  g.repeat_last_n = -1;
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample({local_candidates(l.data(), 10, 5, g, std::vector<Token>{14})}, g, rng), 10);
}

TEST(Sampling, GreedyTakesLowestIdOnTies) {
  const std::vector<float> l = {0.f, 5.f, 1.f, 5.f, 5.f};
  std::mt19937_64 rng(7);
  EXPECT_EQ(sample({local_candidates(l.data(), 0, 5, greedy(), {})}, greedy(), rng), 1);
  // Split so the later tied ids arrive first.
  auto a = local_candidates(l.data() + 3, 3, 2, greedy(), {});
  auto b = local_candidates(l.data(), 0, 3, greedy(), {});
  EXPECT_EQ(sample({a, b}, greedy(), rng), 1);
}

TEST(Sampling, SplitsDrawTheSameTokenAsUnsplit) {
  const int n_vocab = 997;  // prime: no slice count divides it
  SamplingParams top_k = plain(0.9f);
  top_k.top_k = 40;
  SamplingParams chain;  // llama.cpp defaults: top_k 40, top_p 0.95, min_p 0.05, temp 0.8
  chain.repeat_penalty = 1.3f;
  SamplingParams no_top_k = plain(1.3f);
  no_top_k.top_p = 0.9f;
  const std::vector<Token> recent = {5, 17, 500, 996, 17, 250};
  for (const SamplingParams& p : {greedy(), top_k, chain, no_top_k}) {
    for (uint32_t trial = 0; trial < 4; ++trial) {
      const std::vector<float> logits = tied_logits(n_vocab, 100 + trial);
      const uint64_t seed = 1234 + trial;
      std::mt19937_64 rng_whole(seed);
      std::vector<Token> whole;
      for (int d = 0; d < 20; ++d)
        whole.push_back(sample({local_candidates(logits.data(), 0, n_vocab, p, recent)}, p, rng_whole));
      if (p.temp > 0) {
        ASSERT_GT(std::set<Token>(whole.begin(), whole.end()).size(), 1u) << "draws never vary";
      }
      for (int parts = 1; parts <= 7; ++parts) {
        std::mt19937_64 rng(seed);
        for (int d = 0; d < 20; ++d) {
          const Token t = sample(split_candidates(logits, parts, trial * 10 + parts, p, recent), p, rng);
          ASSERT_EQ(t, whole[d]) << "parts " << parts << " draw " << d << " temp " << p.temp;
        }
      }
    }
  }
}

TEST(Sampling, TopKTopPMinPCut) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
  const std::vector<float> l = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  const auto count = [&](const SamplingParams& p) { return frequencies(l, p, 99); };

  SamplingParams k2 = plain(1.f);
  k2.top_k = 2;  // keeps ids 1 and 3: 0.5 / 0.8 and 0.3 / 0.8
  auto f = count(k2);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[1], 0.625, kFreqTol);
  EXPECT_NEAR(f[3], 0.375, kFreqTol);

  SamplingParams tp = plain(1.f);
  tp.top_p = 0.9f;  // cumulative 0.5, 0.8, 0.95: the third token reaches 0.9 and is kept
  f = count(tp);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.count(2), 0u);
  EXPECT_NEAR(f[0], 0.15 / 0.95, kFreqTol);
  tp.top_p = 0.4f;  // the first token alone reaches it
  EXPECT_EQ(count(tp).size(), 1u);

  SamplingParams mp = plain(1.f);
  mp.min_p = 0.25f;  // p >= 0.25 * 0.5 = 0.125: keeps 0.5, 0.3, 0.15
  f = count(mp);
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.count(2), 0u);
  mp.min_p = 0.7f;  // 0.35: only the first
  EXPECT_EQ(count(mp).size(), 1u);
}

TEST(Sampling, MinPCutsBeforeTemperature) {
  // llama.cpp applies min_p to the untempered logits: logit >= 2 + ln(0.1) = -0.30 keeps ids 0, 1.
  // A temperature of 10 flattens the rest; were it applied first, id 2 would pass the cut.
  const std::vector<float> l = {2.f, 0.f, -3.f};
  SamplingParams p = plain(10.f);
  p.min_p = 0.1f;
  const auto f = frequencies(l, p, 5);
  EXPECT_EQ(f.count(2), 0u);
  EXPECT_NEAR(f.at(0), std::exp(0.2) / (std::exp(0.2) + 1.0), kFreqTol);
}

TEST(Sampling, TopPCutsBeforeTemperature) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 untempered: top_p 0.75 keeps two. At temperature 3 they
  // would be 0.34, 0.28, 0.22, 0.16, and a cut after the temperature would keep three.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p = plain(3.f);
  p.top_p = 0.75f;
  const auto f = frequencies(l, p, 11);
  EXPECT_EQ(f.size(), 2u);
  const double a = std::pow(0.5, 1 / 3.0), b = std::pow(0.3, 1 / 3.0);
  EXPECT_NEAR(f.at(0), a / (a + b), kFreqTol);
}

TEST(Sampling, SeededDeterminism) {
  const std::vector<float> l = tied_logits(300, 3);
  SamplingParams p = plain(1.5f);
  const auto draws = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Token> out;
    for (int i = 0; i < 200; ++i) out.push_back(sample({local_candidates(l.data(), 0, 300, p, {})}, p, rng));
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

TEST(Sampling, FrequenciesFollowSoftmax) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 1.4f, 0.f};
  for (float temp : {0.7f, 1.0f, 2.0f}) {
    const auto f = frequencies(l, plain(temp), 2024);
    const auto want = softmax_d(l, temp);
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_NEAR(f.count(Token(i)) ? f.at(Token(i)) : 0.0, want[i], kFreqTol) << "token " << i << " temp " << temp;
  }
}

TEST(Sampling, RejectsEmptyAndNaN) {
  std::mt19937_64 rng(1);
  EXPECT_ERROR(sample({}, plain(1.f), rng), "no candidates to sample from");
  EXPECT_ERROR(sample({LocalCandidates{}}, greedy(), rng), "no candidates to sample from");
  const std::vector<float> l = {0.f, NAN};
  EXPECT_ERROR(local_candidates(l.data(), 0, 2, greedy(), {}), "logit of token 1 is NaN");
}

// The ranges the sampler needs, checked once where parameters enter: each refusal names its
// parameter. A repeat penalty under about 1.4e-45 is 0 as a float, which the penalty divides by.
TEST(Sampling, ValidateRefusesWhatTheSamplerCannotUse) {
  EXPECT_NO_THROW(validate(SamplingParams{}));
  EXPECT_NO_THROW(validate(greedy()));
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return p;
  };
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_penalty = 0; })), "repeat_penalty 0 is outside");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_penalty = static_cast<float>(1e-46); })),
               "repeat_penalty 0 is outside");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_penalty = 1e-40f; })), "repeat_penalty");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_penalty = NAN; })), "repeat_penalty nan");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_penalty = -1; })), "repeat_penalty -1");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.temp = NAN; })), "temperature is NaN");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.top_p = NAN; })), "top_p is NaN");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.min_p = NAN; })), "min_p is NaN");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.presence_penalty = INFINITY; })), "presence_penalty inf");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.frequency_penalty = -NAN; })), "frequency_penalty");
  EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repeat_last_n = -2; })), "repeat_last_n -2");
  EXPECT_NO_THROW(validate(with([](SamplingParams& p) { p.repeat_penalty = kMinRepeatPenalty; })));
  EXPECT_NO_THROW(validate(with([](SamplingParams& p) { p.repeat_last_n = -1; })));
}

}  // namespace
}  // namespace weft::model
