// Constrained decoding over the distributed sampler: a grammar filters the merged candidates, as
// llama.cpp's sampler does lazily, instead of masking the whole vocabulary each token.
//
// Each device returns its slice's top kConstrainedCandidates (or top_k when larger; the whole slice
// when top_k <= 0): constrained_device_params() says so. The coordinator keeps the global top of
// their merge (exact on any split: every token of the global top-K is in its own device's top-K),
// and sample_constrained() walks it in logit order: greedy takes the first token the grammar allows;
// sampling keeps the allowed tokens among the global top-k and runs top-p, min-p and temperature
// over them. Only when none is allowed does the caller look at the whole vocabulary for that
// sequence: the logits of its plausible() tokens, which the devices kept from the step, for
// sample_constrained_whole(); an empty answer then means no token can continue, an error.
#pragma once

#include "model/grammar.h"
#include "model/sampling.h"

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::model {

inline constexpr int32_t kConstrainedCandidates = 64;

// What every token of the vocabulary adds to the output, computed once per model (runtime side,
// from the tokenizer) and shared by every constrained sequence.
struct TokenTexts {
  enum class Kind : uint8_t {
    Text,             // its bytes are output text
    EndOfGeneration,  // EOS, EOT, ...: allowed when the grammar is complete
    Control,          // BOS, other special tokens: never allowed under a grammar
  };
  // Throws weft::Error("grammar", ...) unless both hold one entry per token.
  TokenTexts(std::vector<std::string> bytes, std::vector<Kind> kind);

  std::vector<std::string> bytes;  // [n_vocab]
  std::vector<Kind> kind;          // [n_vocab]
  // The text tokens by their first byte, and the end-of-generation tokens: where a whole-vocabulary
  // choice looks, instead of running the grammar over every token.
  std::array<std::vector<Token>, 256> starting_with;
  std::vector<Token> end_of_generation;
};

// One sequence's grammar and where it stands.
class GrammarConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTexts> texts);

  // Whether the token may come next.
  bool allows(Token t) const;
  // Takes the token (it must be allowed): the grammar advances over its text.
  void accept(Token t);
  // Nothing but the end can follow: generation should stop.
  bool finished() const { return state_.finished(); }
  bool complete() const { return state_.complete(); }
  // Every token allows() may accept: the text tokens whose first byte can come next, and the
  // end-of-generation ones where the grammar is complete (a token's text is accepted only where
  // its first byte is). In no particular order.
  std::vector<Token> plausible() const;

 private:
  GrammarState state_;
  std::shared_ptr<const TokenTexts> texts_;
};

// The sampling parameters a device gets for a constrained sequence: enough candidates for the
// grammar to choose among (see above); `whole_vocabulary` asks for every slice whole.
SamplingParams constrained_device_params(const SamplingParams& p, bool whole_vocabulary);

// The token drawn among the allowed candidates; nullopt when none is allowed. The draw consumes
// the generator exactly as sample() does over the allowed set.
std::optional<Token> sample_constrained(std::vector<LocalCandidates> parts, const SamplingParams& p,
                                        std::mt19937_64& rng, const GrammarConstraint& constraint);

// The same choice over the whole vocabulary: `plausible` holds the constraint's plausible() tokens
// with their penalised logits (listed_candidates() of every slice), each once, in any order.
// Returns the token with its penalised logit; nullopt: none is allowed.
std::optional<Candidate> sample_constrained_whole(std::span<const Candidate> plausible, const SamplingParams& p,
                                                  std::mt19937_64& rng, const GrammarConstraint& constraint);

}  // namespace weft::model
