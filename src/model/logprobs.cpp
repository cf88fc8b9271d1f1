#include "model/logprobs.h"

#include "core/error.h"

#include <algorithm>
#include <optional>

namespace weft::model {

SliceLogprobs slice_logprobs(const float* logits, Token vocab_begin, int32_t n, int32_t n_top, const SamplingParams& p,
                             std::span<const Token> recent) {
  WEFT_ASSERT(n_top >= 0 && n_top <= kMaxTopLogprobs);
  SliceLogprobs s;
  s.lse = slice_score(logits, vocab_begin, n, -1);
  if (n_top > 0) {
    // The top of the raw logits is local_candidates' top-k without penalties.
    SamplingParams raw_top;
    raw_top.temp = 1.f;
    raw_top.top_k = n_top;
    s.top = local_candidates(logits, vocab_begin, n, raw_top, {}).top;
  }
  for (const Candidate& c : penalised_logits(logits, vocab_begin, n, p, recent))
    s.raw.push_back({c.id, logits[c.id - vocab_begin]});
  return s;
}

namespace {
std::optional<float> find_logit(std::span<const Candidate> list, Token id) {
  for (const Candidate& c : list)
    if (c.id == id) return c.logit;
  return std::nullopt;
}
}  // namespace

TokenLogprobs merge_logprobs(std::span<const SliceLogprobs> parts, std::span<const LocalCandidates> candidates,
                             Token sampled, int32_t n_top) {
  WEFT_ASSERT(n_top >= 0 && n_top <= kMaxTopLogprobs);
  std::vector<SliceScore> lse;
  std::vector<Candidate> top;
  std::optional<float> sampled_logit;
  for (const SliceLogprobs& p : parts) {
    lse.push_back(p.lse);
    top.insert(top.end(), p.top.begin(), p.top.end());
    if (!sampled_logit) sampled_logit = find_logit(p.raw, sampled);
  }
  for (const LocalCandidates& c : candidates)
    if (!sampled_logit) sampled_logit = find_logit(c.top, sampled);
  if (!sampled_logit) fail("model", "token {} is among no slice's candidates", sampled);
  const LogSumExp norm = merge_log_sum_exp(lse);
  // Each slice's top n_top holds every one of its entries in the whole top n_top.
  std::sort(top.begin(), top.end(), ranks_before);
  top.resize(std::min(top.size(), static_cast<size_t>(n_top)));
  TokenLogprobs r;
  r.sampled = {sampled, norm.log_prob(*sampled_logit)};
  for (const Candidate& c : top) r.top.push_back({c.id, norm.log_prob(c.logit)});
  return r;
}

}  // namespace weft::model
