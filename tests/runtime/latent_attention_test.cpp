// DeepSeek's multi-head latent attention in the engine: what the plan holds on each device (query
// heads split, one latent row a token on every device, two all-reduces a layer), sequences decoded
// together giving what each gives alone, and a rewound sequence giving the logits of a fresh one.
// The split equality over every config is in moe_parallel_test (MoeArch, MoeRemote), the double-
// precision forward in reference_forward_test, llama.cpp's tokens in llama_cpp_greedy_test.
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/scheduler.h"

#include "support/generated_model.h"
#include "support/job_text.h"

#include <gtest/gtest.h>

namespace weft::runtime {
namespace {

using test_support::cpu_engine_options;
using test_support::GeneratedModel;
using test_support::text_of;

tools::GenModelOptions deepseek(const std::string& type = "q8_0") {
  tools::GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = "deepseek2";
  o.type = type;
  o.seed = 5;
  return o;
}

std::vector<Token> prompt(int seed, int len) {
  std::vector<Token> p{1};
  for (int i = 1; i < len; ++i) p.push_back(static_cast<Token>(3 + (seed * 37 + i * 11) % 300));
  return p;
}

JobRequest greedy(int seed, int len) { return test_support::greedy_request(prompt(seed, len), 10); }

TEST(LatentAttention, PlanSplitsHeadsAndKeepsOneLatentRowPerDevice) {
  const GeneratedModel m(deepseek());
  const Engine e(*m.file, cpu_engine_options(3, 1, 64));
  const auto& plan = e.plan();
  const auto& d = plan.devices[0].dims;
  ASSERT_TRUE(d.mla());
  EXPECT_TRUE(plan.fallbacks.empty());
  for (int l = 0; l < d.n_layer; ++l) EXPECT_EQ(plan.collectives_in_layer(l), 2) << "layer " << l;
  int64_t heads = 0;
  for (const auto& dg : plan.devices) {
    // The cache is not expanded per head: each device keeps the latent and RoPE key of each token.
    EXPECT_EQ(dg.kv_values_per_token, static_cast<uint64_t>(d.n_layer * (d.kv_lora_rank + d.rope.n_rot)));
    for (const auto& ln : dg.nodes)
      if (ln.op == parallel::LocalOp::LatentAttention && ln.layer == 0) {
        heads += ln.q_heads.size();
        EXPECT_EQ(ln.width, ln.q_heads.size() * d.kv_lora_rank);
      }
  }
  EXPECT_EQ(heads, d.n_head);  // each query head on one device
}

// Continuous batching: sequences decoded together, on one device and on a split, give the greedy
// tokens each gives alone.
TEST(LatentAttention, SequencesTogetherGiveWhatEachGivesAlone) {
  const GeneratedModel m(deepseek());
  for (int n_dev : {1, 2}) {
    std::vector<std::string> alone;
    {
      Engine engine(*m.file, cpu_engine_options(n_dev, 1, 64, 8));
      Scheduler s(engine, *m.tok);
      for (int i = 0; i < 3; ++i) alone.push_back(text_of(*s.submit(greedy(i, 5 + 3 * i))));
    }
    Engine engine(*m.file, cpu_engine_options(n_dev, 3, 64, 8));
    Scheduler s(engine, *m.tok);
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; i < 3; ++i) jobs.push_back(s.submit(greedy(i, 5 + 3 * i)));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(text_of(*jobs[i]), alone[i]) << n_dev << " devices, request " << i;
    EXPECT_NE(alone[0], alone[1]);
  }
}

// A sequence rewound past tokens it attended to (truncate, then other tokens) gives the logits of
// an engine that never saw them: the latent rows past the cut are overwritten, never read.
TEST(LatentAttention, RewoundSequenceGivesTheLogitsOfAFreshOne) {
  const GeneratedModel m(deepseek("f32"));
  const auto prefix = prompt(40, 12), detour = prompt(41, 9), rest = prompt(42, 7);
  for (int n_dev : {1, 3}) {
    Engine rewound(*m.file, cpu_engine_options(n_dev, 1, 64, 8)), fresh(*m.file, cpu_engine_options(n_dev, 1, 64, 8));
    rewound.eval_logits(prefix);
    rewound.eval_logits(detour);
    rewound.truncate(static_cast<int32_t>(prefix.size()));
    fresh.eval_logits(prefix);
    EXPECT_EQ(rewound.eval_logits(rest), fresh.eval_logits(rest)) << n_dev << " devices";
  }
}

}  // namespace
}  // namespace weft::runtime
