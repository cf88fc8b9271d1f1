// Recurrent state checkpoints (--ctx-checkpoints): a Gated DeltaNet model's conversation whose next
// turn departs from what the slot holds a few tokens before the end of its last prompt continues
// from the checkpoint kept there, on one device, on splits and with a worker process, giving a
// fresh run's logits; the scheduler reports those tokens cached; the oldest checkpoints make room;
// a re-plan forgets them; bad state copies are refused by the devices.
#include "device/cpu/cpu_device.h"
#include "device/worker_process.h"
#include "runtime/checkpoint_turns.h"
#include "runtime/engine.h"
#include "runtime/parallel_equality.h"
#include "runtime/scheduler.h"

#include "support/expect_error.h"
#include "support/generated_model.h"
#include "support/job_text.h"

#include <gtest/gtest.h>

#include <random>

namespace weft::runtime {
namespace {

using checkpoints::expect_second_turn_from_checkpoint;
using checkpoints::kTurn1;
using parallel::SplitMode;
using test_support::GeneratedModel;
using test_support::qwen35;

// A prompt fed and its first token drawn (greedy): the engine cuts it at its checkpoint.
void feed_prompt(Engine& e, const std::vector<Token>& prompt) {
  model::SamplingParams greedy;
  greedy.temp = 0;
  std::mt19937_64 rng(1);
  e.eval_and_sample(prompt, greedy, {}, rng);
}

TEST(StateCheckpoints, SecondTurnContinuesFromTheCheckpointOnEverySplit) {
  for (const std::string arch : {"qwen35", "qwen3next"}) {
    const GeneratedModel m(qwen35("q8_0", arch));
    for (const equality::Config& c :
         {equality::Config{"one", SplitMode::None, {1}}, equality::Config{"tp2", SplitMode::Tensor, {1, 1}},
          equality::Config{"tp3_uneven", SplitMode::Tensor, {1, 2, 3}},
          equality::Config{"layer2", SplitMode::Layer, {1, 1}}})
      expect_second_turn_from_checkpoint(*m.file, equality::options(c), arch + " " + c.name);
  }
}

TEST(StateCheckpoints, SecondTurnContinuesFromTheCheckpointWithAWorker) {
  const GeneratedModel m(qwen35("q8_0"));
  using device::remote::testing_support::Worker;
  Worker w;
  EngineOptions o = equality::options({"remote", SplitMode::Tensor, {1, 1}});
  o.devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, w.address()};
  expect_second_turn_from_checkpoint(*m.file, o, "cpu:1 + a worker");
}

// --exact sums alike however a prompt is cut into steps: the continued turn gives the logits of
// a fresh engine fed the whole second prompt at once.
TEST(StateCheckpoints, UnderExactTheContinuedTurnIsAFreshRunsBits) {
  const GeneratedModel m(qwen35("q4_k_m"));
  EngineOptions o = equality::options({"tp2", SplitMode::Tensor, {1, 1}});
  o.exact = true;
  const auto turn1 = equality::some_prompt(300, kTurn1);
  std::vector<Token> turn2(turn1.begin(), turn1.end() - 3);
  for (Token t : equality::some_prompt(300, 30, 2)) turn2.push_back(t);
  Engine e(*m.file, o);
  feed_prompt(e, turn1);
  const int32_t at = e.resumable(0, kTurn1 - 3);
  ASSERT_EQ(at, kTurn1 - 4);
  e.truncate(at);
  Engine fresh(*m.file, o);
  EXPECT_EQ(e.eval_logits(std::vector<Token>(turn2.begin() + at, turn2.end())), fresh.eval_logits(turn2));
}

// Without checkpoints the same turn starts over (and still gives a fresh run's tokens).
TEST(StateCheckpoints, NoneKeptMeansStartingOver) {
  const GeneratedModel m(qwen35("f32"));
  EngineOptions o = equality::single();
  o.ctx_checkpoints = 0;
  Engine e(*m.file, o);
  feed_prompt(e, equality::some_prompt(300, kTurn1));
  EXPECT_EQ(e.resumable(0, kTurn1 - 2), 0);
  EXPECT_ERROR(e.truncate(kTurn1 - 4), "its recurrent state is at position 80, not 76");
}

// Each prompt keeps one, the oldest making room past --ctx-checkpoints; rewinding below a
// checkpoint forgets those after it.
TEST(StateCheckpoints, TheOldestMakeRoomAndARewindForgetsTheLaterOnes) {
  const GeneratedModel m(qwen35("f32"));
  EngineOptions o = equality::single();
  o.ctx_checkpoints = 2;
  Engine e(*m.file, o);
  std::vector<int32_t> kept;
  for (int turn = 0; turn < 3; ++turn) {
    feed_prompt(e, equality::some_prompt(300, turn == 0 ? kTurn1 : 66, turn));
    kept.push_back(e.n_past() - 4);
  }
  EXPECT_EQ(e.resumable(0, kept[0] + 1), 0) << "the first made room for the third";
  EXPECT_EQ(e.resumable(0, kept[1] + 1), kept[1]);
  EXPECT_EQ(e.resumable(0, kept[2] + 1), kept[2]);
  e.truncate(kept[1]);
  EXPECT_EQ(e.resumable(0, kept[2] + 1), kept[1]) << "the one after the rewind is another future's";
}

// The scheduler's chat turns: the second request reports the checkpoint's tokens cached, and its
// text is a fresh scheduler's (--exact: the same bits however the prompt was cut).
TEST(StateCheckpoints, SchedulerContinuesTheNextTurnFromTheCheckpoint) {
  const GeneratedModel m(qwen35("q8_0"));
  const auto turn1 = equality::some_prompt(300, kTurn1);
  std::vector<Token> turn2(turn1.begin(), turn1.end() - 2);
  for (Token t : equality::some_prompt(300, 12, 3)) turn2.push_back(t);
  EngineOptions o = test_support::cpu_engine_options(2, 2, 256, 32);
  o.exact = true;
  std::string fresh;
  {
    Engine engine(*m.file, o);
    Scheduler s(engine, *m.tok);
    fresh = test_support::text_of(*s.submit(test_support::greedy_request(turn2, 8)));
  }
  Engine engine(*m.file, o);
  Scheduler s(engine, *m.tok);
  test_support::text_of(*s.submit(test_support::greedy_request(turn1, 8)));
  JobUsage usage;
  EXPECT_EQ(test_support::text_of(*s.submit(test_support::greedy_request(turn2, 8)), &usage), fresh);
  EXPECT_EQ(usage.cached_tokens, kTurn1 - 4);
}

// A request goes to the slot that continues the furthest into it: one holding 98 of its tokens
// exactly over one sharing 100 whose state went on past them (its checkpoint at 96).
TEST(StateCheckpoints, SchedulerPicksTheSlotThatContinuesFurthest) {
  const GeneratedModel m(qwen35("q8_0"));
  const auto x = equality::some_prompt(300, 120, 4);
  Engine engine(*m.file, test_support::cpu_engine_options(1, 2, 256, 32));
  Scheduler s(engine, *m.tok);
  auto a = s.submit(test_support::greedy_request({x.begin(), x.begin() + 100}, 20));  // slot 0, on past 100
  auto b = s.submit(test_support::greedy_request({x.begin(), x.begin() + 98}, 1));    // slot 1, at 98
  test_support::text_of(*a);
  test_support::text_of(*b);
  JobUsage usage;
  test_support::text_of(*s.submit(test_support::greedy_request(x, 4)), &usage);
  EXPECT_EQ(usage.cached_tokens, 98);
}

// A re-plan (--rebalance, forced every 4 steps) loads new devices and replays the slots: the
// checkpoints are gone with the old ones, and the next turn starts over.
TEST(StateCheckpoints, AReplanForgetsThem) {
  const GeneratedModel m(qwen35("f32"));
  EngineOptions o = equality::options({"tp2", SplitMode::Tensor, {1, 1}});
  o.rebalance = {true, 4, 0.0, 0.0};
  Engine e(*m.file, o);
  model::SamplingParams greedy;
  greedy.temp = 0;
  std::mt19937_64 rng(1);
  std::vector<Token> feed = equality::some_prompt(300, kTurn1);
  for (int i = 0; i < 12; ++i) feed = {e.eval_and_sample(feed, greedy, {}, rng)};
  ASSERT_GE(e.rebalances(), 1);
  EXPECT_EQ(e.resumable(0, kTurn1 - 2), 0);
}

// A device checks a step's state copies: state slots it holds, a graph with recurrent state.
TEST(StateCheckpoints, DevicesRefuseBadStateCopies) {
  const GeneratedModel q(qwen35("f32"));
  tools::GenModelOptions llama;
  llama.preset = "tiny";
  const GeneratedModel l(llama);
  for (const GeneratedModel* m : {&q, &l}) {
    EngineOptions o = equality::single();
    o.n_seq = 2;
    o.ctx_checkpoints = 1;
    Engine e(*m->file, o);
    const auto plan = e.plan();
    device::LoadOptions lo{o.n_ctx, o.n_seq, o.n_batch, o.k_type, o.v_type, false, m == &q ? 2 : 0};
    device::CpuDevice d({});
    d.load(plan.devices[0], *m->file, lo);
    device::Step s = device::Step::single({1, 2, 3}, 0);
    s.state_copies = {{0, 4}};
    d.submit(s);
    if (m == &q) {
      EXPECT_ERROR(d.wait(), "a state copy from slot 0 to 4 (state slots 0..3)");
      s.state_copies = {{1, 1}};
      d.submit(s);
      EXPECT_ERROR(d.wait(), "a state copy from slot 1 to 1");
      s.state_copies = {{0, 2}};
      d.submit(s);
      EXPECT_NO_THROW(d.wait());
    } else {
      EXPECT_ERROR(d.wait(), "state copies for a graph without recurrent state");
    }
  }
}

}  // namespace
}  // namespace weft::runtime
