// Two-stage sampling: per-slice candidates on each device, one draw on the coordinator.
// Candidates are always ordered by (logit desc, id asc). That total order is what makes the merged
// top-k of any vocabulary split equal the top-k of the whole vocabulary, ties included.
#include "model/sampling.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace weft::model {

namespace {

// Probabilities of sorted candidates at the given temperature, max-subtracted so large logits are safe.
std::vector<double> softmax_of(const std::vector<Candidate>& c, double temp) {
  std::vector<double> prob(c.size());
  double sum = 0.0;
  for (size_t i = 0; i < c.size(); ++i) sum += prob[i] = std::exp((double(c[i].logit) - c[0].logit) / temp);
  for (double& x : prob) x /= sum;
  return prob;
}

// Uniform in [0, 1) from the top 53 bits: spelled out so a seed draws the same token on every
// standard library (std::uniform_real_distribution's algorithm is implementation-defined).
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace

// llama.cpp's penalties sampler: each distinct id of the window is penalised once by the repeat
// penalty, however often it occurs (dividing a positive logit and multiplying a negative one both
// make it less likely), then by frequency_penalty per occurrence and presence_penalty once (OpenAI's).
std::vector<Candidate> penalised_logits(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                        std::span<const Token> recent) {
  const bool off = p.repeat_penalty == 1.0f && p.presence_penalty == 0.f && p.frequency_penalty == 0.f;
  if (off || p.repeat_last_n == 0 || recent.empty()) return {};
  validate(p);  // the coordinator checked them before the step: this only guards other callers
  // repeat_last_n < 0: the whole of `recent` (llama.cpp's -1, "the context size").
  const size_t window = p.repeat_last_n < 0 ? recent.size() : std::min(recent.size(), size_t(p.repeat_last_n));
  std::vector<Token> ids;
  for (Token id : recent.subspan(recent.size() - window))
    if (id >= vocab_begin && id - vocab_begin < n) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<Candidate> out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    float l = logits[ids[i] - vocab_begin];
    l = l > 0.f ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(j - i) * p.frequency_penalty + p.presence_penalty;
    out.push_back({ids[i], l});
    i = j;
  }
  return out;
}

void validate(const SamplingParams& p) {
  for (const auto& [name, v] : {std::pair{"temperature", p.temp}, {"top_p", p.top_p}, {"min_p", p.min_p}})
    if (std::isnan(v)) fail("sampling", "{} is NaN; it must be a number", name);
  // Written so that NaN fails too.
  if (!(p.repeat_penalty >= kMinRepeatPenalty && p.repeat_penalty <= kMaxRepeatPenalty))
    fail("sampling", "repeat_penalty {} is outside {}..{} (1: off)", p.repeat_penalty, kMinRepeatPenalty,
         kMaxRepeatPenalty);
  for (const auto& [name, v] :
       {std::pair{"presence_penalty", p.presence_penalty}, {"frequency_penalty", p.frequency_penalty}})
    if (!(std::fabs(v) <= kMaxAdditivePenalty))
      fail("sampling", "{} {} is outside -{}..{} (0: off)", name, v, kMaxAdditivePenalty, kMaxAdditivePenalty);
  if (p.repeat_last_n < -1) fail("sampling", "repeat_last_n {} is below -1 (-1: the whole context)", p.repeat_last_n);
}

int32_t candidates_needed(const SamplingParams& p, int32_t slice_size) {
  WEFT_ASSERT(slice_size >= 0);
  if (p.temp <= 0.f) return std::min(1, slice_size);
  if (p.top_k > 0) return std::min(p.top_k, slice_size);
  return slice_size;
}

namespace {
[[noreturn]] void fail_nan(const float* logits, Token vocab_begin, int32_t n) {
  const float* at = std::find_if(logits, logits + n, [](float l) { return std::isnan(l); });
  fail("sampling", "logit of token {} is NaN", vocab_begin + (at - logits));
}
}  // namespace

std::vector<Candidate> listed_candidates(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                         std::span<const Token> recent, std::span<const Token> ids) {
  WEFT_ASSERT(n >= 0 && vocab_begin >= 0);
  const std::vector<Candidate> pen = penalised_logits(logits, vocab_begin, n, p, recent);  // ascending by id
  std::vector<Candidate> out;
  for (Token id : ids) {
    if (id < vocab_begin || id - vocab_begin >= n) continue;
    Candidate c{id, logits[id - vocab_begin]};
    if (std::isnan(c.logit)) fail("sampling", "logit of token {} is NaN", id);
    const auto it = std::lower_bound(pen.begin(), pen.end(), id, [](const Candidate& a, Token t) { return a.id < t; });
    if (it != pen.end() && it->id == id) c = *it;
    out.push_back(c);
  }
  return out;
}

LocalCandidates local_candidates(const float* logits, Token vocab_begin, int32_t n, const SamplingParams& p,
                                 std::span<const Token> recent) {
  WEFT_ASSERT(n >= 0 && vocab_begin >= 0);
  const std::vector<Candidate> pen = penalised_logits(logits, vocab_begin, n, p, recent);
  const size_t k = static_cast<size_t>(candidates_needed(p, n));
  // One pass keeping the best k in a heap whose front is the worst of them: most logits lose one
  // comparison with it (a sort of the whole slice per sequence and step cost 10% of a batch).
  std::vector<Candidate> top;
  top.reserve(k + 1);
  auto next_pen = pen.begin();
  bool nan = false;
  for (int32_t i = 0; i < n; ++i) {
    Candidate c{vocab_begin + i, logits[i]};
    nan |= std::isnan(c.logit);
    if (next_pen != pen.end() && next_pen->id == c.id) c = *next_pen++;
    if (top.size() < k) {
      top.push_back(c);
      std::push_heap(top.begin(), top.end(), ranks_before);
    } else if (k > 0 && ranks_before(c, top.front())) {
      std::pop_heap(top.begin(), top.end(), ranks_before);
      top.back() = c;
      std::push_heap(top.begin(), top.end(), ranks_before);
    }
  }
  // A NaN would break the ordering every device must agree on; it means the forward pass broke.
  if (nan) fail_nan(logits, vocab_begin, n);
  std::sort_heap(top.begin(), top.end(), ranks_before);
  return {std::move(top)};
}

Token sample(std::vector<LocalCandidates> parts, const SamplingParams& p, std::mt19937_64& rng) {
  std::vector<Candidate> c;
  for (auto& part : parts) c.insert(c.end(), part.top.begin(), part.top.end());
  if (c.empty()) fail("sampling", "no candidates to sample from");
  std::sort(c.begin(), c.end(), ranks_before);
  if (p.temp <= 0.f) return c[0].id;  // greedy: the argmax, lowest id among equal logits

  // llama.cpp's default chain: top_k -> top_p -> min_p -> temperature -> softmax -> draw.
  // Each filter keeps at least one candidate (llama.cpp's min_keep = 1).
  if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(p.top_k);
  if (p.top_p < 1.0f) {
    // Smallest prefix whose probability (before temperature) reaches top_p.
    const std::vector<double> prob = softmax_of(c, 1.0);
    double cum = 0.0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += prob[i];
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (p.min_p > 0.f) {
    // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p), as llama.cpp tests it.
    const float min_logit = c[0].logit + std::log(p.min_p);
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= min_logit) ++keep;
    c.resize(keep);
  }
  const std::vector<double> prob = softmax_of(c, p.temp);
  const double u = uniform01(rng);
  double cum = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += prob[i];
    if (u < cum) return c[i].id;
  }
  return c.back().id;  // u within rounding of 1
}

}  // namespace weft::model
