// The bytes every token of the vocabulary adds to the output, for constrained decoding
// (model/constrained_sampling.h): computed once per model from the tokenizer, then shared.
#pragma once

#include "model/constrained_sampling.h"
#include "tokenizer/tokenizer.h"

#include <memory>

namespace weft::runtime {

// Text tokens carry their piece's bytes; end-of-generation tokens are marked so; every other token
// whose piece is empty (BOS, control tokens) is Control, never allowed under a grammar.
std::shared_ptr<const model::TokenTexts> token_texts(const tokenizer::Tokenizer& tok);

}  // namespace weft::runtime
