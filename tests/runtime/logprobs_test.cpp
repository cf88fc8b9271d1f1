// Log-probabilities reduced on the devices (each slice's log-sum-exp and top raw logits, merged on
// the coordinator) are the same for one device, tensor splits even, uneven and with a zero share,
// a layer split and worker processes, and equal a double-precision log-softmax of
// Engine::eval_logits: the top 20 and the drawn token's, with temperature, top-k and penalties on
// (logprobs ignore them).
#include "model/logprobs.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

#include "device/worker_process.h"
#include "runtime/logprob_equality.h"
#include "support/expect_error.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace weft::runtime {
namespace {

const std::string kStories = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";
using device::DeviceSpec;
using device::remote::testing_support::Worker;

EngineOptions with(std::vector<DeviceSpec> devices, std::vector<double> ratios = {}) {
  EngineOptions o;
  o.devices = std::move(devices);
  o.mode = o.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  o.ratios = std::move(ratios);
  o.n_ctx = 128;
  o.n_batch = 64;
  o.k_type = o.v_type = DType::F32;
  return o;
}

using logprob_equality::draw;
using logprob_equality::Drawn;
using logprob_equality::expect_same;
using logprob_equality::kSteps;

TEST(Logprobs, EqualOnEverySplitAndWorkersAndToALogSoftmaxOfTheLogits) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  const DeviceSpec cpu{DeviceSpec::Kind::Cpu, 1, -1, ""};
  Engine one(*f, with({cpu}));
  const auto prompt = tokenizer::Tokenizer::from_gguf(*f)->encode("Once upon a time, there was a little", true);
  const Drawn ref = draw(one, prompt, model::kMaxTopLogprobs);
  ASSERT_EQ(ref.tokens.size(), size_t{kSteps});

  // The reference: every step's full logits gathered, a log-softmax in double, ranked with ties
  // to the lower id.
  one.reset();
  std::vector<Token> feed = prompt;
  bool any_outside_top = false;
  for (int i = 0; i < kSteps; ++i) {
    const std::vector<float> logits = one.eval_logits(feed);
    double max = logits[0], sum = 0;
    for (float l : logits) max = std::max(max, double(l));
    for (float l : logits) sum += std::exp(double(l) - max);
    std::vector<Token> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](Token a, Token b) { return logits[a] > logits[b]; });
    auto lp = [&](Token t) { return double(logits[t]) - max - std::log(sum); };
    const model::TokenLogprobs& got = ref.logprobs[i];
    ASSERT_EQ(got.top.size(), size_t{model::kMaxTopLogprobs});
    for (size_t j = 0; j < got.top.size(); ++j) {
      EXPECT_EQ(got.top[j].id, order[j]) << "step " << i << " rank " << j;
      EXPECT_NEAR(got.top[j].logprob, lp(order[j]), 1e-5) << "step " << i << " rank " << j;
    }
    EXPECT_EQ(got.sampled.id, ref.tokens[i]);
    EXPECT_NEAR(got.sampled.logprob, lp(ref.tokens[i]), 1e-5) << "step " << i;
    any_outside_top |= std::find(order.begin(), order.begin() + 3, ref.tokens[i]) == order.begin() + 3;
    feed = {ref.tokens[i]};
  }
  EXPECT_TRUE(any_outside_top) << "every drawn token was in the top 3: the sampled-token path is untested";

  // Fewer alternatives: the same numbers, cut; none: only the drawn token's.
  const Drawn three = draw(one, prompt, 3), zero = draw(one, prompt, 0);
  for (int i = 0; i < kSteps; ++i) {
    ASSERT_EQ(three.logprobs[i].top.size(), 3u);
    EXPECT_EQ(three.logprobs[i].top[2].id, ref.logprobs[i].top[2].id);
    EXPECT_TRUE(zero.logprobs[i].top.empty());
    EXPECT_EQ(zero.logprobs[i].sampled.logprob, ref.logprobs[i].sampled.logprob);
  }

  struct Split {
    std::string name;
    std::vector<DeviceSpec> devices;
    std::vector<double> ratios;
  };
  for (const Split& s : std::vector<Split>{{"tp2", {cpu, cpu}, {}},
                                           {"tp3", {cpu, cpu, cpu}, {}},
                                           {"tp2 -ts 3,1", {cpu, cpu}, {3, 1}},
                                           {"tp3 -ts 2,0,1", {cpu, cpu, cpu}, {2, 0, 1}},
                                           {"tp3 -ts 1,2,4", {cpu, cpu, cpu}, {1, 2, 4}}}) {
    Engine e(*f, with(s.devices, s.ratios));
    expect_same(draw(e, prompt, model::kMaxTopLogprobs), ref, s.name);
  }
  {  // a layer split: the last device holds the whole vocabulary
    EngineOptions o = with({cpu, cpu});
    o.mode = parallel::SplitMode::Layer;
    Engine e(*f, std::move(o));
    expect_same(draw(e, prompt, model::kMaxTopLogprobs), ref, "layer2");
  }
  Worker w1, w2;
  const DeviceSpec r1{DeviceSpec::Kind::Remote, 1, -1, w1.address()}, r2{DeviceSpec::Kind::Remote, 1, -1, w2.address()};
  for (const Split& s :
       std::vector<Split>{{"2 workers", {r1, r2}, {}}, {"cpu + 2 workers -ts 1,3,2", {cpu, r1, r2}, {1, 3, 2}}}) {
    Engine e(*f, with(s.devices, s.ratios));
    expect_same(draw(e, prompt, model::kMaxTopLogprobs), ref, s.name);
  }
}

TEST(Logprobs, TopLogprobsOutsideTheRangeIsTheSequencesFault) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  Engine e(*f, with({{DeviceSpec::Kind::Cpu, 1, -1, ""}}));
  const std::vector<Token> t = {1, 2};
  SeqStep q;
  q.tokens = t;
  q.sample = true;
  q.sampling.temp = 0;
  q.top_logprobs = model::kMaxTopLogprobs + 1;
  EXPECT_ERROR(e.step_batch({&q, 1}), "top_logprobs 21 outside -1..20");
  q.top_logprobs = -1;  // not asked: nothing comes back
  EXPECT_FALSE(e.step_batch({&q, 1})[0].logprobs.has_value());
}

}  // namespace
}  // namespace weft::runtime
