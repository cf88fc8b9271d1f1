// Perplexity on stories260K (a trained model) over a text written here: checked against a value
// computed independently from eval_logits (every scored position's full logits, one position at a
// time, a log-softmax in double), equal across 1 and 3 devices, and across batch layouts (a chunk
// in pieces, several chunks per step in separate KV slots).
#include "runtime/perplexity.h"
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

#include "support/expect_error.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <cmath>

namespace weft::runtime {
namespace {

const std::string kStories = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";

// Over 2 * 64 tokens in stories260K's vocabulary, in its own domain so the model predicts well.
constexpr const char* kText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her "
    "friends. One day, she saw a big red ball under a tree. She wanted to play with it, but it was too high. "
    "Lily asked her mom for help. Her mom smiled and said, \"Let's get it together.\" They found a long stick "
    "and pushed the ball down. Lily was very happy. She played with the ball all day long.\n"
    "The next day, Lily went to the park again. She met a boy named Tim. Tim had a small dog. The dog was "
    "brown and very fast. Lily and Tim threw the ball and the dog ran after it. They laughed and laughed.";

// Relative: the devices' float sums differ in order between splits; the reference sums in double.
constexpr double kPplRelTol = 1e-4;

EngineOptions cpus(int n, int32_t n_ctx, int32_t n_batch, int32_t n_seq = 1) {
  EngineOptions o;
  o.mode = n == 1 ? parallel::SplitMode::None : parallel::SplitMode::Tensor;
  for (int i = 0; i < n; ++i) o.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  o.n_seq = n_seq;
  o.k_type = o.v_type = DType::F32;  // the reference runs the same cache: only the reduction differs
  return o;
}

// llama-perplexity's numbers, from full logits: each chunk from an empty cache, BOS first, the
// positions of its second half fed one at a time so that each eval_logits is one row.
PerplexityResult reference(Engine& e, const std::vector<Token>& tokens, int n_ctx, Token bos) {
  PerplexityResult r;
  const int n_chunk = static_cast<int>(tokens.size()) / n_ctx, first = n_ctx / 2;
  for (int c = 0; c < n_chunk; ++c) {
    std::vector<Token> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    const Token original0 = chunk[0];
    chunk[0] = bos;
    e.reset();
    std::vector<float> logits = e.eval_logits(std::span<const Token>(chunk).first(first + 1));
    chunk[0] = original0;
    for (int j = first; j < n_ctx - 1; ++j) {
      double max = logits[0];
      for (float l : logits) max = std::max(max, double(l));
      double sum = 0;
      for (float l : logits) sum += std::exp(double(l) - max);
      const double lp = double(logits[chunk[j + 1]]) - max - std::log(sum);
      r.nll_sum -= lp;
      r.nll2_sum += lp * lp;
      ++r.count;
      if (j + 1 < n_ctx - 1) logits = e.eval_logits(std::span<const Token>(chunk).subspan(j + 1, 1));
    }
    r.running.push_back(std::exp(r.nll_sum / double(r.count)));
  }
  const double mean = r.nll_sum / double(r.count), var = r.nll2_sum / double(r.count) - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_error = std::sqrt(var / double(r.count - 1)) * r.ppl;
  return r;
}

void expect_close(const PerplexityResult& a, const PerplexityResult& b, const std::string& what) {
  EXPECT_EQ(a.count, b.count) << what;
  ASSERT_EQ(a.running.size(), b.running.size()) << what;
  for (size_t i = 0; i < a.running.size(); ++i) EXPECT_NEAR(a.running[i] / b.running[i], 1.0, kPplRelTol) << what;
  EXPECT_NEAR(a.ppl / b.ppl, 1.0, kPplRelTol) << what;
  EXPECT_NEAR(a.ppl_error / b.ppl_error, 1.0, 1e-3) << what;
}

TEST(Perplexity, Stories260kMatchesAReferenceFromFullLogitsOnOneAndThreeDevices) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  const std::vector<Token> tokens = tok->encode(kText, true);
  ASSERT_TRUE(tok->adds_bos());
  ASSERT_GE(tokens.size(), 2u * 64);
  PerplexityOptions o;
  o.n_ctx = 64;
  o.bos = tok->bos();

  Engine ref_engine(*f, cpus(1, 64, 64));
  const PerplexityResult ref = reference(ref_engine, tokens, 64, tok->bos());
  ASSERT_GE(ref.running.size(), 2u);
  EXPECT_EQ(ref.count, static_cast<int64_t>(ref.running.size()) * 31);
  // A trained model on its own kind of text: far better than chance (512 tokens), not perfect.
  EXPECT_GT(ref.ppl, 1.2);
  EXPECT_LT(ref.ppl, 20);

  for (int n : {1, 3}) {
    Engine e(*f, cpus(n, 64, 64));
    std::vector<double> seen;
    const PerplexityResult r = perplexity(e, tokens, o, [&](int k, double ppl) {
      EXPECT_EQ(k, static_cast<int>(seen.size()) + 1);
      seen.push_back(ppl);
    });
    EXPECT_EQ(seen, r.running);
    expect_close(r, ref, std::to_string(n) + " devices");
  }
  {  // a chunk in pieces of 24 tokens, the scored half straddling them
    Engine e(*f, cpus(3, 64, 24));
    expect_close(perplexity(e, tokens, o), ref, "3 devices, batch 24");
  }
  {  // two chunks per step, in two KV slots
    Engine e(*f, cpus(3, 64, 128, 2));
    expect_close(perplexity(e, tokens, o), ref, "3 devices, 2 chunks a step");
  }
  o.n_chunks = 1;
  Engine e(*f, cpus(1, 64, 64));
  EXPECT_EQ(perplexity(e, tokens, o).count, 31);
}

TEST(Perplexity, TooShortATextIsAnError) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  Engine e(*f, cpus(1, 64, 64));
  const std::vector<Token> tokens(100, 5);
  PerplexityOptions o;
  o.n_ctx = 64;
  EXPECT_ERROR(perplexity(e, tokens, o), "you need at least 128 tokens to evaluate perplexity with a context of 64");
  o.n_ctx = 128;
  EXPECT_ERROR(perplexity(e, std::vector<Token>(300, 5), o), "chunks of 128 tokens exceed the engine's context 64");
}

}  // namespace
}  // namespace weft::runtime
