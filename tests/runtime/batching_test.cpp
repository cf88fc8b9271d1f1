// Continuous batching changes throughput, never results: sequences stepped together (prompts
// processed while others decode, slots reused) give each sequence the greedy tokens it gets alone,
// on every split configuration, and logits within kBatchLogitRelTol.
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "tools/gen_model.h"

#include "device/worker_process.h"
#include "runtime/parallel_equality.h"
#include "support/expect_error.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace weft::runtime {
namespace {

// A batched step runs a sequence's decode token through the many-token matmul (blocked GEMM over
// the whole batch) where alone it goes through the one-token path: the same int8 dot products,
// summed in another order. Relative to the largest logit magnitude, f32 KV cache.
constexpr double kBatchLogitRelTol = 1e-4;

using equality::Config;  // one CPU device (1 thread) per ratio

std::vector<Config> configs() {
  using parallel::SplitMode;
  return {{"one", SplitMode::None, {1}},
          {"tp2", SplitMode::Tensor, {1, 1}},
          {"tp3_uneven", SplitMode::Tensor, {1, 2, 3}},
          {"layer2", SplitMode::Layer, {1, 1}}};
}

EngineOptions options(const Config& c, int n_seq, DType cache = DType::F16) {
  EngineOptions o;
  o.mode = c.mode;
  o.ratios = c.ratios;
  o.moe_split = c.moe;
  for (size_t i = 0; i < c.ratios.size(); ++i) o.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
  o.n_ctx = 128;
  o.n_batch = 32;
  o.n_seq = n_seq;
  o.k_type = o.v_type = cache;
  return o;
}

model::SamplingParams greedy_params() {
  model::SamplingParams p;
  p.temp = 0;
  return p;
}

struct Outcome {
  std::vector<std::vector<Token>> tokens;  // each sequence's generated tokens
  std::vector<std::vector<float>> logits;  // each sequence's logits of its first generated token
};

// A small continuous-batching scheduler: sequence i joins at step `join[i]` in slot i % n_seq
// once that slot is free; each step carries the next token of every decoding sequence and prompt
// chunks of at most `chunk` tokens, within the engine's n_batch.
Outcome run_batched(Engine& e, const std::vector<std::vector<Token>>& prompts, int n_gen, int chunk,
                    const std::vector<int>& join, bool want_logits = false) {
  struct Seq {
    size_t fed = 0;
    std::vector<Token> out;
    bool done = false, running = false;
  };
  std::vector<Seq> s(prompts.size());
  Outcome r;
  r.tokens.resize(prompts.size());
  r.logits.resize(prompts.size());
  std::vector<int> slot_owner(e.n_seq(), -1);
  for (int step = 0; std::any_of(s.begin(), s.end(), [](const Seq& q) { return !q.done; }); ++step) {
    for (size_t i = 0; i < s.size(); ++i) {
      const int slot = static_cast<int>(i % e.n_seq());
      if (!s[i].running && !s[i].done && step >= join[i] && slot_owner[slot] < 0) {
        slot_owner[slot] = static_cast<int>(i);
        s[i].running = true;
        e.truncate(slot, 0);  // a reused slot starts over
      }
    }
    std::vector<SeqStep> batch;
    std::vector<size_t> who;
    std::vector<std::vector<Token>> feeds;
    feeds.reserve(s.size());
    int budget = e.n_batch();
    for (size_t i = 0; i < s.size() && budget > 0; ++i) {
      Seq& q = s[i];
      if (!q.running) continue;
      const auto& p = prompts[i];
      if (q.fed < p.size()) {
        const size_t n = std::min<size_t>({static_cast<size_t>(chunk), p.size() - q.fed, static_cast<size_t>(budget)});
        feeds.emplace_back(p.begin() + q.fed, p.begin() + q.fed + n);
        q.fed += n;
      } else {
        feeds.push_back({q.out.back()});
      }
      SeqStep st;
      st.seq = static_cast<int32_t>(i % e.n_seq());
      st.tokens = feeds.back();
      st.sample = q.fed == p.size();
      st.logits = want_logits && st.sample && q.out.empty();
      st.sampling = greedy_params();
      budget -= static_cast<int>(st.tokens.size());
      batch.push_back(st);
      who.push_back(i);
    }
    if (batch.empty()) continue;
    auto out = e.step_batch(batch);
    for (size_t k = 0; k < batch.size(); ++k) {
      Seq& q = s[who[k]];
      if (!batch[k].sample) continue;
      if (batch[k].logits) r.logits[who[k]] = std::move(out[k].logits);
      q.out.push_back(out[k].token);
      if (static_cast<int>(q.out.size()) == n_gen) {
        q.done = true;
        q.running = false;
        slot_owner[batch[k].seq] = -1;
        r.tokens[who[k]] = q.out;
      }
    }
  }
  return r;
}

// Each prompt alone: a fresh single-slot engine of the same configuration.
Outcome run_alone(const gguf::File& f, const Config& c, const std::vector<std::vector<Token>>& prompts, int n_gen,
                  int chunk, DType cache, bool want_logits = false) {
  Outcome r;
  for (const auto& p : prompts) {
    Engine e(f, options(c, 1, cache));
    const Outcome one = run_batched(e, {p}, n_gen, chunk, {0}, want_logits);
    r.tokens.push_back(one.tokens[0]);
    r.logits.push_back(one.logits[0]);
  }
  return r;
}

std::vector<std::vector<Token>> prompts_for(int64_t n_vocab) {
  std::vector<std::vector<Token>> ps;
  for (int i = 0; i < 8; ++i) {
    std::vector<Token> p{1};
    const int len = 3 + 5 * i % 23;  // 3 .. 25 tokens: one or several chunks
    for (int k = 1; k < len; ++k) p.push_back(static_cast<Token>((k * 7919 + i * 104729 + 13) % n_vocab));
    ps.push_back(p);
  }
  return ps;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double scale = 1e-6, worst = 0;
  for (float x : a) scale = std::max(scale, std::abs(static_cast<double>(x)));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst / scale;
}

void expect_batch_invariant(const gguf::File& f, int n_gen, const std::vector<Config>& cs = configs()) {
  const auto prompts = prompts_for(f.tensor("token_embd.weight").shape[1]);
  const std::vector<int> together(8, 0), staggered = {0, 1, 2, 3, 5, 8, 13, 21};
  for (const auto& c : cs) {
    const Outcome alone = run_alone(f, c, prompts, n_gen, 8, DType::F16);
    for (const auto& join : {together, staggered}) {
      Engine e(f, options(c, 8));
      const Outcome batched = run_batched(e, prompts, n_gen, 8, join);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(batched.tokens[i], alone.tokens[i]) << c.name << " sequence " << i;
    }
    // Four slots for eight sequences: each slot is reused once, mid-run.
    Engine reuse(f, options(c, 4));
    const Outcome r = run_batched(reuse, prompts, n_gen, 8, staggered);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.tokens[i], alone.tokens[i]) << c.name << " reuse " << i;
  }
}

const std::string kStories = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";

TEST(Batching, Stories260kSequencesTogetherMatchAlone) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  expect_batch_invariant(*f, 24);
}

TEST(Batching, GeneratedModelSequencesTogetherMatchAlone) {
  for (const char* type : {"q4_0", "q4_k_m", "f16"}) {
    tools::GenModelOptions o;
    o.preset = "tiny";
    o.type = type;
    o.seed = 5;
    const auto bytes = tools::generate_model_bytes(o);
    auto f = gguf::File::parse(bytes.data(), bytes.size(), std::string("tiny-") + type);
    SCOPED_TRACE(type);
    expect_batch_invariant(*f, 16);
  }
}

// A prompt's tokens grouped by expert, several sequences' tokens in one step: the same experts
// and sums as each sequence alone, in either expert split.
TEST(Batching, MoeModelSequencesTogetherMatchAlone) {
  std::vector<Config> cs = configs();
  cs.push_back({"tp3_uneven_expert", parallel::SplitMode::Tensor, {1, 2, 3}, parallel::MoeSplit::Expert});
  for (const char* arch : {"qwen3moe", "qwen2moe"}) {
    tools::GenModelOptions o;
    o.preset = "tiny-moe";
    o.arch = arch;
    o.type = "q4_0";
    o.seed = 5;
    const auto bytes = tools::generate_model_bytes(o);
    auto f = gguf::File::parse(bytes.data(), bytes.size(), std::string("tiny-moe-") + arch);
    SCOPED_TRACE(arch);
    expect_batch_invariant(*f, 16, cs);
  }
}

TEST(Batching, LogitsOfBatchedSequencesMatchAloneWithinTolerance) {
  tools::GenModelOptions o;
  o.preset = "tiny";
  o.type = "q4_0";
  o.seed = 9;
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "tiny-q4_0");
  const auto prompts = prompts_for(f->tensor("token_embd.weight").shape[1]);
  for (const auto& c : configs()) {
    const Outcome alone = run_alone(*f, c, prompts, 4, 8, DType::F32, true);
    Engine e(*f, options(c, 8, DType::F32));
    const Outcome batched = run_batched(e, prompts, 4, 8, {0, 1, 2, 3, 5, 8, 13, 21}, true);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_FALSE(alone.logits[i].empty());
      EXPECT_LT(rel_diff(alone.logits[i], batched.logits[i]), kBatchLogitRelTol) << c.name << " sequence " << i;
    }
  }
}

TEST(Batching, RemoteWorkersBatchLikeOneDevice) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  using device::remote::testing_support::Worker;
  Worker w1, w2;
  EngineOptions mix = options({"remote", parallel::SplitMode::Tensor, {1, 1, 1}}, 8);
  mix.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, w1.address()};
  mix.devices[2] = {device::DeviceSpec::Kind::Remote, 1, -1, w2.address()};
  const auto prompts = prompts_for(f->tensor("token_embd.weight").shape[1]);
  const Outcome alone = run_alone(*f, configs()[0], prompts, 16, 8, DType::F16);
  Engine e(*f, mix);
  const Outcome batched = run_batched(e, prompts, 16, 8, {0, 1, 2, 3, 5, 8, 13, 21});
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched.tokens[i], alone.tokens[i]) << "sequence " << i;
}

TEST(Batching, BadBatchesAreRefusedNamingTheSlot) {
  tools::GenModelOptions o;
  o.preset = "tiny";
  const auto bytes = tools::generate_model_bytes(o);
  auto f = gguf::File::parse(bytes.data(), bytes.size(), "tiny");
  Engine e(*f, options(configs()[1], 2));
  const std::vector<Token> t = {1, 2, 3};
  SeqStep a, b;
  a.tokens = b.tokens = t;
  a.sampling = b.sampling = greedy_params();
  EXPECT_ERROR(e.step_batch({}), "an empty batch");
  b.seq = 0;
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{a, b}), "sequence slot 0 twice in one batch");
  b.seq = 2;
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{a, b}), "sequence slot 2 outside 0..1");
  b.seq = 1;
  b.tokens = {};
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{a, b}), "slot 1: nothing to evaluate");
  const std::vector<Token> many(33, 1);
  b.tokens = many;
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{b}), "a batch of 33 tokens exceeds --batch-size 32");
  a.sample = true;
  a.sampling.temp = 0.5f;
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{a}), "slot 0: sampling needs a generator");
  // Each slot holds n_ctx positions of its own: slot 1 fills up, slot 0 still has room.
  const std::vector<Token> chunk(32, 1);
  b.tokens = chunk;
  for (int i = 0; i < 4; ++i) e.step_batch(std::vector<SeqStep>{b});
  EXPECT_EQ(e.n_past(1), 128);
  EXPECT_ERROR(e.step_batch(std::vector<SeqStep>{b}), "context is full: slot 1 holds 128 + 32 tokens, over -c 128");
  a.sample = false;
  EXPECT_NO_THROW(e.step_batch(std::vector<SeqStep>{a}));
  EXPECT_EQ(e.n_past(0), 3);
  EXPECT_ERROR(e.truncate(1, 129), "truncate slot 1 to 129 positions, 128 held");
}

}  // namespace
}  // namespace weft::runtime
