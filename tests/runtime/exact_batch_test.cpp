// --exact and batches: a sequence's logits are the same bits however its prompt is cut into steps
// (chunks of 1, 7, 64 or the whole prompt) and whichever sequences share its steps (others whose
// prompts arrive while it decodes), memcmp against the sequence alone, its prompt in one step.
// Without --exact they are not: attention's decode kernel, Gated DeltaNet's chunked form and a
// type's unpacked batch panels sum in other orders (src/kernels/README.md sections 6 and 7).
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tools/gen_model.h"

#include "runtime/parallel_equality.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace weft::runtime {
namespace {

using equality::some_prompt;

constexpr int kDecode = 8;

EngineOptions exact_options(int32_t n_batch, int32_t n_seq) {
  EngineOptions o = equality::single();
  o.exact = true;
  o.k_type = o.v_type = DType::F32;
  o.n_batch = n_batch;
  o.n_seq = n_seq;
  o.n_ctx = 256;
  return o;
}

// Another sequence's prompt: n tokens from its own start.
std::vector<Token> other_prompt(int64_t n_vocab, int n, int start) {
  std::vector<Token> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<Token>((start + i * 104729) % n_vocab));
  return p;
}

Token argmax(const std::vector<float>& l) {
  return static_cast<Token>(std::max_element(l.begin(), l.end()) - l.begin());
}

// The logits after the prompt and after each of kDecode greedy tokens, the prompt fed n_batch tokens a step.
std::vector<std::vector<float>> alone(const gguf::File& f, const std::vector<Token>& prompt, int32_t n_batch) {
  Engine e(f, exact_options(n_batch, 1));
  std::vector<std::vector<float>> out{e.eval_logits(prompt)};
  for (int i = 0; i < kDecode; ++i) {
    const Token t = argmax(out.back());
    out.push_back(e.eval_logits(std::span<const Token>(&t, 1)));
  }
  return out;
}

// The same sequence in slot 0 while seven others join, one a step, each with its whole prompt in
// the step it arrives, then decoding beside it.
std::vector<std::vector<float>> among_others(const gguf::File& f, const std::vector<Token>& prompt, int64_t n_vocab) {
  Engine e(f, exact_options(512, 8));
  std::vector<std::vector<Token>> prompts{prompt};
  for (int s = 1; s < 8; ++s) prompts.push_back(other_prompt(n_vocab, 5 + 9 * s, 100 + s));
  std::vector<Token> next(8, -1);  // each sequence's token to feed, once its prompt is in
  std::vector<std::vector<float>> out;
  for (int step = 0; step <= kDecode; ++step) {
    std::vector<SeqStep> batch;
    for (int s = 0; s < 8 && s <= step; ++s) {
      SeqStep q;
      q.seq = s;
      q.tokens = next[s] < 0 ? std::span<const Token>(prompts[s]) : std::span<const Token>(&next[s], 1);
      q.logits = true;
      batch.push_back(q);
    }
    const auto res = e.step_batch(batch);
    for (size_t i = 0; i < batch.size(); ++i) next[batch[i].seq] = argmax(res[i].logits);
    out.push_back(res[0].logits);
  }
  return out;
}

int first_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return static_cast<int>(i);
  return a.size() == b.size() ? -1 : static_cast<int>(std::min(a.size(), b.size()));
}

void expect_batch_invariant(const gguf::File& f) {
  const int64_t n_vocab = f.tensor("token_embd.weight").shape[1];
  const auto prompt = some_prompt(n_vocab, 70);
  const auto want = alone(f, prompt, 512);
  for (int32_t n_batch : {1, 7, 64})
    EXPECT_EQ(first_difference(alone(f, prompt, n_batch), want), -1) << "chunks of " << n_batch;
  EXPECT_EQ(first_difference(among_others(f, prompt, n_vocab), want), -1) << "among seven others";
}

class ExactBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactBatch, LogitsDoNotDependOnChunksOrNeighbours) {
  tools::GenModelOptions o;
  const std::string p = GetParam();
  o.type = p.substr(0, p.find('/'));
  o.arch = p.find('/') == std::string::npos ? "llama" : p.substr(p.find('/') + 1);
  const bool moe = o.arch == "qwen3moe" || o.arch == "deepseek2" || o.arch == "gpt-oss";
  o.preset = moe ? "tiny-moe" : "tiny";
  o.sliding_window = 6;  // gemma3, gpt-oss: windows the 70-token prompt runs past
  o.seed = 3;
  if (o.type.find("_k") != std::string::npos || o.type == "iq4_xs")  // rows of whole super-blocks
    o.overrides = {.n_embd = 512, .n_layer = 2, .n_ff = 1024, .n_head = 8, .n_head_kv = 4, .n_vocab = 320};
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), p);
  expect_batch_invariant(*f);
}

INSTANTIATE_TEST_SUITE_P(Types, ExactBatch,
                         ::testing::Values("f32", "f16", "q8_0", "q4_0", "q5_1", "iq4_nl", "q4_k_m", "q6_k", "q3_k",
                                           "q5_k", "q2_k", "iq4_xs", "f32/qwen35", "q8_0/qwen3moe", "q8_0/gemma3",
                                           "f32/deepseek2", "q8_0/gpt-oss"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace weft::runtime
