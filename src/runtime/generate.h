// The generation loop shared by `weft run` and the tests: encode, prefill, sample until -n or EOS.
#pragma once

#include "model/grammar.h"
#include "model/sampling.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::runtime {

// Why generation ended: -n reached, an end-of-generation token, or no room left in the context.
enum class StopReason { Limit, EndOfGeneration, ContextFull };
std::string_view stop_reason_name(StopReason r);  // "limit" | "eog" | "context_full"

struct GenerateResult {
  std::vector<Token> prompt;
  std::vector<Token> generated;
  std::string text;           // generated text only
  double prompt_seconds = 0;  // prefill, first token sampled included
  double gen_seconds = 0;     // the remaining tokens
  StopReason stop = StopReason::Limit;
};

// on_text receives each generated piece as soon as it is sampled (streaming). With a grammar
// (which needs tok) only tokens it allows are drawn, generation stops where nothing else can
// follow, and a state no token continues is an error.
GenerateResult generate(Engine& engine, const tokenizer::Tokenizer* tok, const std::vector<Token>& prompt,
                        int n_predict, const model::SamplingParams& p,
                        const std::function<void(const std::string&)>& on_text = {},
                        std::shared_ptr<const model::Grammar> grammar = nullptr);

// Seed for a run: llama.cpp's LLAMA_DEFAULT_SEED (0xFFFFFFFF) means a random one.
uint64_t resolve_seed(uint64_t seed);

}  // namespace weft::runtime
