// One turn of an interactive session (a chat reply, or the text after typed input) on the
// engine's single sequence: the cache is cut back to what it still shares with the sequence,
// the rest of the sequence is fed, and tokens are drawn until the end of the turn.
#pragma once

#include "model/sampling.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace weft::runtime {

struct TurnResult {
  StopReason stop = StopReason::Limit;
  bool interrupted = false;  // should_stop() ended it
  size_t n_fed = 0;          // tokens of the sequence evaluated before the first draw
  size_t n_drawn = 0;        // tokens drawn, an end-of-generation one included
  double seconds = 0;
};

struct TurnHooks {
  std::function<void(Token)> accept;             // appends a drawn token to the sequence (required)
  std::function<void(const std::string&)> text;  // each drawn token's text, unless it ends the turn
  std::function<bool()> should_stop;             // polled after each token
};

// `seq` holds the whole sequence; the cache may keep its first `keep` tokens (fewer if it holds
// fewer). n_predict < 0: until the end of generation or a full context. The last token drawn
// stays unevaluated: it is part of seq, and the next turn feeds it.
TurnResult run_turn(Engine& engine, const tokenizer::Tokenizer& tok, const std::vector<Token>& seq, int32_t keep,
                    int n_predict, const model::SamplingParams& p, std::mt19937_64& rng, const TurnHooks& hooks);

}  // namespace weft::runtime
