// Constrained sampling over split candidates: only allowed tokens drawn, the same token whatever
// the split, EOS only when the grammar is complete, and "none allowed" reported for the fallback.
#include "model/constrained_sampling.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <random>

namespace weft::model {
namespace {

using Kind = TokenTexts::Kind;

std::shared_ptr<const TokenTexts> texts() {
  auto t = std::make_shared<TokenTexts>();
  const std::vector<std::string> text = {"{", "}",  "\"",   "a",    "b", ":", " ",
                                         "1", "ab", "\xc3", "\xa9", "",  "",  "\"a\":"};
  t->bytes = text;
  t->kind.assign(text.size(), Kind::Text);
  t->kind[11] = Kind::EndOfGeneration;
  t->kind[12] = Kind::Control;
  return t;
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
          auto t = sample_constrained(split(logits, slices, constrained_device_params(p, false)), p, rng, c, false);
          if (!t) t = sample_constrained(split(logits, slices, constrained_device_params(p, true)), p, rng, c, true);
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
  EXPECT_EQ(sample_constrained(split(logits, 2, constrained_device_params(p, false)), p, rng, c, false), Token{4});
  // "b" outside the candidates the devices return: none allowed, the caller fetches everything.
  p.temp = 0.5f;
  p.top_k = 1;
  EXPECT_EQ(sample_constrained(split(logits, 2, constrained_device_params(p, false)), p, rng, c, false), std::nullopt);
  EXPECT_EQ(sample_constrained(split(logits, 2, constrained_device_params(p, true)), p, rng, c, true), Token{4});
  c.accept(4);
  // Finished: only EOS; and a vocabulary without one has nothing to give.
  EXPECT_EQ(sample_constrained(split(logits, 3, constrained_device_params(p, true)), p, rng, c, true), kEos);
}

}  // namespace
}  // namespace weft::model
