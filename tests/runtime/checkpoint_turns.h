// A conversation's second turn continued from a recurrent model's checkpoint (EngineOptions::
// ctx_checkpoints), on any devices: the helper of state_checkpoint_test and vk_equality_test.
#pragma once

#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/parallel_equality.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace weft::runtime::checkpoints {

constexpr int kTurn1 = 80;  // the first prompt's tokens; its checkpoint is kept 4 before its end

// Turn 1 feeds kTurn1 tokens (the engine cuts the prompt at its checkpoint) and draws 3 tokens;
// turn 2 keeps its first kTurn1 - 2 tokens (a template rendering the end of the last turn again
// differently) and adds 20 of its own. The engine rewinds to the checkpoint (kTurn1 - 4) and feeds
// the rest in one step: the logits are, bit for bit, a fresh engine's fed the same two pieces
// (the same steps, so the same sums on any device).
inline void expect_second_turn_from_checkpoint(const gguf::File& f, const EngineOptions& o, const std::string& name) {
  const int64_t n_vocab = 300;
  const std::vector<Token> turn1 = equality::some_prompt(n_vocab, kTurn1);
  std::vector<Token> turn2(turn1.begin(), turn1.end() - 2);
  for (Token t : equality::some_prompt(n_vocab, 20, 1)) turn2.push_back(t);
  const int32_t at = kTurn1 - 4;

  const std::vector<Token> rest(turn2.begin() + at, turn2.end());
  std::vector<float> continued;
  {  // one engine at a time: a worker serves one session
    Engine e(f, o);
    model::SamplingParams greedy;
    greedy.temp = 0;
    std::mt19937_64 rng(1);
    std::vector<Token> feed = turn1;
    for (int i = 0; i < 3; ++i) feed = {e.eval_and_sample(feed, greedy, {}, rng)};
    ASSERT_EQ(e.n_past(), kTurn1 + 2) << name;
    EXPECT_EQ(e.resumable(0, kTurn1 - 2), at) << name << ": the checkpoint";
    EXPECT_EQ(e.resumable(0, at - 1), 0) << name << ": below it, nothing to continue from";
    e.truncate(at);
    continued = e.eval_logits(rest);
    EXPECT_EQ(e.device_losses(), 0) << name;
  }
  Engine fresh(f, o);
  fresh.eval_logits(std::vector<Token>(turn2.begin(), turn2.begin() + at));
  EXPECT_EQ(continued, fresh.eval_logits(rest)) << name;
}

}  // namespace weft::runtime::checkpoints
