// Sampling, split in two stages so that tensor parallel never gathers the full logits:
//  1. each device reduces its vocabulary slice to a few candidates (local_candidates);
//  2. the coordinator merges the candidates of all devices and draws one token (sample).
// With top_k > 0 (llama.cpp's default 40) the merged top-k is exact; greedy needs one candidate.
#pragma once

#include "core/token.h"

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace weft::model {

// model::Token names weft::Token (core/token.h) for code that still spells it so (runtime/engine.cpp).
using weft::Token;

struct SamplingParams {
  float temp = 0.8f;              // <= 0: greedy
  int32_t top_k = 40;             // <= 0: off
  float top_p = 0.95f;            // >= 1: off
  float min_p = 0.05f;            // <= 0: off
  float repeat_penalty = 1.0f;    // 1: off (llama.cpp's --repeat-penalty)
  int32_t repeat_last_n = 64;     // window of the three penalties (-1: all of `recent`)
  float presence_penalty = 0.f;   // 0: off; subtracted once from each token of the window (OpenAI's)
  float frequency_penalty = 0.f;  // 0: off; subtracted per occurrence in the window
  uint64_t seed = 0xFFFFFFFF;     // llama.cpp's LLAMA_DEFAULT_SEED means "random"
};

struct Candidate {
  Token id;
  float logit;
};

// The order every candidate list keeps: the higher logit first, the lower id among equal logits.
// A total order, so the merged top of any vocabulary split is the whole vocabulary's top.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

struct LocalCandidates {
  std::vector<Candidate> top;  // best candidates of the slice, descending by logit (after penalty)
};

// The ranges the sampler needs, checked once where parameters enter (a request, the CLI, a step):
// temperature, top_p and min_p are numbers (not NaN), repeat_penalty lies in
// [kMinRepeatPenalty, kMaxRepeatPenalty] (0 would divide a logit by zero, a float under about 1e-45
// is 0, and a tiny one divides a logit into infinity), presence and frequency penalties lie within
// +-kMaxAdditivePenalty, repeat_last_n is -1 or more. Throws weft::Error("sampling", ...) naming the
// parameter and its value.
inline constexpr float kMinRepeatPenalty = 1e-6f, kMaxRepeatPenalty = 1e6f;
inline constexpr float kMaxAdditivePenalty = 1e6f;
void validate(const SamplingParams& p);

// How many candidates each device must return for these params: 1 for greedy, top_k when set,
// else the whole slice (exact, at the cost of moving it).
int32_t candidates_needed(const SamplingParams& p, int32_t slice_size);

// The penalised logits of the slice's tokens in the penalties' window, ascending by id (empty:
// penalties off, or none of the window in the slice). Logits of ids [vocab_begin, vocab_begin + n).
std::vector<Candidate> penalised_logits(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                        std::span<const Token> recent);

// Stage 1, on a device: logits of vocab ids [vocab_begin, vocab_begin + n). `recent` are the
// last tokens (for the repetition penalty, applied llama.cpp-style to ids inside the slice).
LocalCandidates local_candidates(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                 std::span<const Token> recent);

// The listed tokens of the slice (ids outside it skipped) with their penalised logits, in the
// order listed: what a constrained sequence's whole-vocabulary choice looks at. Throws
// weft::Error("sampling", ...) on a NaN among them.
std::vector<Candidate> listed_candidates(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                         std::span<const Token> recent, std::span<const Token> ids);

// Stage 2, on the coordinator: merge every device's candidates, apply top-k, top-p, min-p and
// temperature in llama.cpp's order, and draw (or take the argmax when greedy). Ties in logits are
// broken by the lower token id, so the result does not depend on how the vocabulary was split.
Token sample(std::vector<LocalCandidates> parts, const SamplingParams& p, std::mt19937_64& rng);

}  // namespace weft::model
