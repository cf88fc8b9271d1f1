#include "model/constrained_sampling.h"

#include "core/error.h"

#include <algorithm>

namespace weft::model {

TokenTexts::TokenTexts(std::vector<std::string> bytes_, std::vector<Kind> kind_)
    : bytes(std::move(bytes_)), kind(std::move(kind_)) {
  if (bytes.size() != kind.size()) fail("grammar", "token texts: {} texts for {} kinds", bytes.size(), kind.size());
  for (size_t t = 0; t < bytes.size(); ++t) {
    if (kind[t] == Kind::EndOfGeneration) end_of_generation.push_back(static_cast<Token>(t));
    if (kind[t] == Kind::Text && !bytes[t].empty())
      starting_with[static_cast<unsigned char>(bytes[t][0])].push_back(static_cast<Token>(t));
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTexts> texts)
    : state_(std::move(grammar)), texts_(std::move(texts)) {
  if (!texts_ || texts_->bytes.size() != texts_->kind.size()) fail("grammar", "token texts missing or inconsistent");
}

bool GrammarConstraint::allows(Token t) const {
  if (t < 0 || static_cast<size_t>(t) >= texts_->bytes.size()) return false;
  switch (texts_->kind[t]) {
    case TokenTexts::Kind::EndOfGeneration: return state_.complete();
    case TokenTexts::Kind::Control: return false;
    case TokenTexts::Kind::Text: break;
  }
  const std::string& b = texts_->bytes[t];
  return !b.empty() && state_.accepts(b);  // an empty text would let the model stall forever
}

std::vector<Token> GrammarConstraint::plausible() const {
  std::vector<Token> out;
  if (state_.complete()) out = texts_->end_of_generation;
  for (int b = 0; b < 256; ++b) {
    const auto& list = texts_->starting_with[b];
    const char c = static_cast<char>(b);
    if (!list.empty() && state_.accepts(std::string_view(&c, 1))) out.insert(out.end(), list.begin(), list.end());
  }
  return out;
}

void GrammarConstraint::accept(Token t) {
  if (!allows(t)) fail("grammar", "token {} does not continue the grammar", t);
  if (texts_->kind[t] == TokenTexts::Kind::Text) state_.advance(texts_->bytes[t]);
}

SamplingParams constrained_device_params(const SamplingParams& p, bool whole_vocabulary) {
  SamplingParams d = p;
  d.temp = 1.f;  // candidates_needed gives greedy one candidate; the grammar needs several
  d.top_k = whole_vocabulary || p.top_k <= 0 ? 0 : std::max(p.top_k, kConstrainedCandidates);
  if (p.temp <= 0.f && !whole_vocabulary) d.top_k = kConstrainedCandidates;
  return d;
}

std::optional<Token> sample_constrained(std::vector<LocalCandidates> parts, const SamplingParams& p,
                                        std::mt19937_64& rng, const GrammarConstraint& constraint) {
  std::vector<Candidate> c;
  for (auto& part : parts) c.insert(c.end(), part.top.begin(), part.top.end());
  std::sort(c.begin(), c.end(), ranks_before);
  // The global top: what every split returns alike. Greedy looks through all of it; sampling
  // through its top_k (the filters after top_k see only the allowed ones).
  const bool whole = p.temp > 0.f && p.top_k <= 0;  // top_k off: slices came whole
  const size_t exact = whole ? c.size() : p.temp <= 0.f ? kConstrainedCandidates : static_cast<size_t>(p.top_k);
  c.resize(std::min(c.size(), exact));
  std::vector<Candidate> allowed;
  for (const Candidate& x : c) {
    if (!constraint.allows(x.id)) continue;
    allowed.push_back(x);
    if (p.temp <= 0.f) break;  // greedy: the first allowed one in logit order
  }
  if (allowed.empty()) return std::nullopt;
  if (p.temp <= 0.f) return allowed[0].id;
  SamplingParams q = p;
  q.top_k = whole ? p.top_k : 0;  // over the global top, top_k was applied before the grammar
  return sample({LocalCandidates{std::move(allowed)}}, q, rng);
}

std::optional<Candidate> sample_constrained_whole(std::span<const Candidate> plausible, const SamplingParams& p,
                                                  std::mt19937_64& rng, const GrammarConstraint& constraint) {
  std::vector<Candidate> allowed;
  for (const Candidate& c : plausible) {
    // Greedy runs the grammar only over tokens that would beat the best allowed one so far.
    if (p.temp <= 0.f && !allowed.empty() && !ranks_before(c, allowed[0])) continue;
    if (!constraint.allows(c.id)) continue;
    if (p.temp <= 0.f)
      allowed.assign(1, c);
    else
      allowed.push_back(c);
  }
  if (allowed.empty()) return std::nullopt;
  if (p.temp <= 0.f) return allowed[0];
  std::sort(allowed.begin(), allowed.end(), ranks_before);
  const Token t = sample({LocalCandidates{allowed}}, p, rng);
  return *std::find_if(allowed.begin(), allowed.end(), [&](const Candidate& c) { return c.id == t; });
}

}  // namespace weft::model
