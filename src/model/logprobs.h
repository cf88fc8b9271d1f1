// Log-probabilities of generated tokens (OpenAI's logprobs / top_logprobs, llama.cpp's n_probs)
// without gathering the logits, in the two stages sampling uses: each device reduces its
// vocabulary slice to its log-sum-exp terms and its top raw logits, the coordinator merges them.
//
// Which logits: the model's own (after Gemma's soft-cap, before penalties and temperature), as
// llama-server reports them by default (post_sampling_probs off: get_token_probabilities takes
// the softmax of llama_get_logits_ith). So a token's logprob does not depend on the sampler.
#pragma once

#include "model/sampling.h"
#include "model/scoring.h"

#include <cstdint>
#include <span>
#include <vector>

namespace weft::model {

// OpenAI's limit on top_logprobs (llama-server accepts as many for n_probs; weft keeps one bound).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct SliceLogprobs {
  SliceScore lse;              // the slice's max and sum of exp (no target)
  std::vector<Candidate> top;  // its n_top largest raw logits, in ranks_before order
  std::vector<Candidate> raw;  // raw logits of its ids the penalties changed (penalised_logits' ids)
};

// Stage 1, on a device, beside local_candidates: logits of ids [vocab_begin, vocab_begin + n),
// n_top in 0..kMaxTopLogprobs; p and recent as the candidates saw them, so that the sampled
// token's raw logit reaches the coordinator even when the penalties moved it.
SliceLogprobs slice_logprobs(const float* logits, Token vocab_begin, int32_t n, int32_t n_top, const SamplingParams& p,
                             std::span<const Token> recent);

struct TokenLogprob {
  Token id = -1;
  double logprob = 0;
};
struct TokenLogprobs {
  TokenLogprob sampled;           // the drawn token's
  std::vector<TokenLogprob> top;  // the n_top most likely, ties to the lower id
};

// Stage 2, on the coordinator: every slice's terms, the candidates the token was drawn from (its
// logit there is the raw one unless a slice lists it in `raw`), the token, and how many to list.
TokenLogprobs merge_logprobs(std::span<const SliceLogprobs> parts, std::span<const LocalCandidates> candidates,
                             Token sampled, int32_t n_top);

}  // namespace weft::model
