// Constrained sampling over split candidates: only allowed tokens drawn, the same token whatever
// the split, EOS only when the grammar is complete, and "none allowed" reported for the fallback.
#include "model/constrained_sampling.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace weft::model {
namespace {

using Kind = TokenTexts::Kind;

std::shared_ptr<const TokenTexts> texts() {
  const std::vector<std::string> text = {"{", "}",  "\"",   "a",    "b", ":", " ",
                                         "1", "ab", "\xc3", "\xa9", "",  "",  "\"a\":"};
  std::vector<Kind> kind(text.size(), Kind::Text);
  kind[11] = Kind::EndOfGeneration;
  kind[12] = Kind::Control;
  return std::make_shared<TokenTexts>(text, kind);
}
constexpr Token kEos = 11;

// Candidates of `n_slices` equal slices of the logits, as the devices return them.
std::vector<LocalCandidates> split(const std::vector<float>& logits, int n_slices, const SamplingParams& d) {
  std::vector<LocalCandidates> parts;
  int32_t n = static_cast<int32_t>(logits.size());
  for (int s = 0; s < n_slices; ++s) {
    int32_t b = n * s / n_slices, e = n * (s + 1) / n_slices;
    parts.push_back(local_candidates(logits.data() + b, b, e - b, d, {}));
  }
  return parts;
}

// The listed tokens of `n_slices` slices, as the coordinator gathers them from the devices.
std::vector<Candidate> listed(const std::vector<float>& logits, int n_slices, const SamplingParams& p,
                              std::span<const Token> recent, std::span<const Token> ids) {
  std::vector<Candidate> all;
  int32_t n = static_cast<int32_t>(logits.size());
  for (int s = 0; s < n_slices; ++s) {
    int32_t b = n * s / n_slices, e = n * (s + 1) / n_slices;
    auto part = listed_candidates(logits.data() + b, b, e - b, p, recent, ids);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::optional<Token> whole_choice(const std::vector<float>& logits, int n_slices, const SamplingParams& p,
                                  std::mt19937_64& rng, const GrammarConstraint& c) {
  auto t = sample_constrained_whole(listed(logits, n_slices, p, {}, c.plausible()), p, rng, c);
  if (t) {
    EXPECT_EQ(t->logit, logits[t->id]);
  }
  return t ? std::optional<Token>(t->id) : std::nullopt;
}

TEST(ConstrainedSampling, AllowsFollowsTheGrammarAndEosOnlyWhenComplete) {
  GrammarConstraint c(Grammar::parse(R"(root ::= "{" ("\"a\":" [0-9])? "}" | "é")"), texts());
  EXPECT_TRUE(c.allows(0));
  EXPECT_TRUE(c.allows(9));    // the first byte of é
  EXPECT_FALSE(c.allows(10));  // a continuation byte with no start
  EXPECT_FALSE(c.allows(kEos));
  EXPECT_FALSE(c.allows(12));  // control
  c.accept(0);
  EXPECT_TRUE(c.allows(13));
  EXPECT_FALSE(c.allows(8));
  EXPECT_ERROR(c.accept(8), "does not continue the grammar");
  c.accept(13);
  c.accept(7);
  c.accept(1);
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.finished());
  EXPECT_TRUE(c.allows(kEos));
}

TEST(ConstrainedSampling, SameTokensOnEverySplitAndOnlyAllowedOnes) {
  auto g = Grammar::parse(R"(root ::= "{" ("\"" [ab]+ "\"" ":" " "? "1")? "}")");
  for (float temp : {0.f, 0.9f}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::mt19937 gen(trial);
      std::normal_distribution<float> nd(0.f, 2.f);
      SamplingParams p;
      p.temp = temp;
      p.top_k = 5;
      p.min_p = 0.f;
      std::vector<Token> first;
      for (int slices : {1, 2, 3, 5}) {
        GrammarConstraint c(g, texts());
        std::mt19937_64 rng(7);
        std::vector<Token> out;
        std::mt19937 lg(trial * 31 + 1);
        for (int step = 0; step < 20 && !c.finished(); ++step) {
          std::vector<float> logits(texts()->bytes.size());
          for (float& l : logits) l = std::normal_distribution<float>(0.f, 2.f)(lg);
          auto t = sample_constrained(split(logits, slices, constrained_device_params(p, false)), p, rng, c);
          if (!t) t = whole_choice(logits, slices, p, rng, c);
          ASSERT_TRUE(t.has_value());
          ASSERT_TRUE(c.allows(*t));
          c.accept(*t);
          out.push_back(*t);
          if (*t == kEos) break;
        }
        if (slices == 1) first = out;
        EXPECT_EQ(out, first) << "temp " << temp << " trial " << trial << " slices " << slices;
      }
    }
  }
}

TEST(ConstrainedSampling, GreedyTakesTheFirstAllowedAndReportsNoneAllowed) {
  auto g = Grammar::parse(R"(root ::= "b")");
  GrammarConstraint c(g, texts());
  std::vector<float> logits(texts()->bytes.size(), 0.f);
  logits[3] = 5.f;  // "a", refused
  logits[4] = 1.f;  // "b"
  SamplingParams p;
  p.temp = 0.f;
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_constrained(split(logits, 2, constrained_device_params(p, false)), p, rng, c), Token{4});
  EXPECT_EQ(whole_choice(logits, 3, p, rng, c), Token{4});
  // "b" outside the candidates the devices return: none allowed, the caller fetches everything.
  p.temp = 0.5f;
  p.top_k = 1;
  EXPECT_EQ(sample_constrained(split(logits, 2, constrained_device_params(p, false)), p, rng, c), std::nullopt);
  EXPECT_EQ(whole_choice(logits, 2, p, rng, c), Token{4});
  c.accept(4);
  // Finished: only EOS; and a vocabulary without one has nothing to give.
  EXPECT_EQ(whole_choice(logits, 3, p, rng, c), kEos);
  GrammarConstraint none(Grammar::parse(R"(root ::= "{" "z")"), texts());  // no token holds "z"
  none.accept(0);
  p.temp = 0.f;
  EXPECT_EQ(whole_choice(logits, 2, p, rng, none), std::nullopt);
  p.temp = 0.7f;
  EXPECT_EQ(whole_choice(logits, 2, p, rng, none), std::nullopt);
}

// plausible() never leaves out a token allows() takes: its first byte is always accepted alone,
// a code point's first byte included; and it names end-of-generation only when complete.
TEST(ConstrainedSampling, PlausibleHoldsEveryAllowedToken) {
  auto g = Grammar::parse(R"(root ::= "{" ("\"a\":" [0-9] | "\"" "é"+ "\"")? "}" | "é" "é"?)");
  std::mt19937 gen(5);
  for (int walk = 0; walk < 100; ++walk) {
    GrammarConstraint c(g, texts());
    for (int step = 0; step < 8 && !c.finished(); ++step) {
      const std::vector<Token> p = c.plausible();
      std::vector<Token> allowed;
      for (Token t = 0; t < static_cast<Token>(texts()->bytes.size()); ++t)
        if (c.allows(t)) {
          allowed.push_back(t);
          EXPECT_NE(std::find(p.begin(), p.end(), t), p.end()) << "token " << t << " at step " << step;
        }
      EXPECT_EQ(std::find(p.begin(), p.end(), kEos) != p.end(), c.complete());
      if (allowed.empty()) break;
      c.accept(allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(gen)]);
    }
  }
}

// The whole-vocabulary choice is the one a sort of the whole vocabulary gives: greedy the best
// allowed token (ties to the lower id), sampling the same draw over the allowed ones, penalties
// applied first.
TEST(ConstrainedSampling, TheWholeVocabularyChoiceIsTheSortedOnes) {
  auto g = Grammar::parse(R"(root ::= [ab"1:]+)");
  for (int trial = 0; trial < 200; ++trial) {
    std::mt19937 gen(trial);
    std::vector<float> logits(texts()->bytes.size());
    for (float& l : logits) l = static_cast<float>(std::uniform_int_distribution<int>(-3, 3)(gen));  // ties
    SamplingParams p;
    p.temp = trial % 2 ? 0.8f : 0.f;
    p.top_k = trial % 3 ? 0 : 2;
    p.repeat_penalty = 1.5f;
    const std::vector<Token> recent = {3, 4};
    GrammarConstraint c(g, texts());
    std::vector<Token> every(logits.size());
    std::iota(every.begin(), every.end(), 0);
    std::vector<Candidate> sorted = listed(logits, 1, p, recent, every);
    for (const Candidate& x : sorted)  // the penalty, on the two recent tokens only
      EXPECT_EQ(x.logit == logits[x.id], (x.id != 3 && x.id != 4) || logits[x.id] == 0.f) << x.id;
    std::sort(sorted.begin(), sorted.end(), ranks_before);
    std::erase_if(sorted, [&](const Candidate& x) { return !c.allows(x.id); });
    ASSERT_FALSE(sorted.empty());
    std::mt19937_64 want_rng(trial), got_rng(trial);
    const Token want = p.temp <= 0.f ? sorted[0].id : sample({LocalCandidates{sorted}}, p, want_rng);
    const auto got = sample_constrained_whole(listed(logits, 2, p, recent, c.plausible()), p, got_rng, c);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->id, want) << "trial " << trial;
    EXPECT_EQ(got_rng(), want_rng()) << "trial " << trial << ": the draw used the generator differently";
  }
}

}  // namespace
}  // namespace weft::model
