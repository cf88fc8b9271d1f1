#include "runtime/token_texts.h"

namespace weft::runtime {

std::shared_ptr<const model::TokenTexts> token_texts(const tokenizer::Tokenizer& tok) {
  auto t = std::make_shared<model::TokenTexts>();
  const int32_t n = tok.n_vocab();
  t->bytes.resize(n);
  t->kind.resize(n);
  for (Token id = 0; id < n; ++id) {
    if (tok.is_eog(id)) {
      t->kind[id] = model::TokenTexts::Kind::EndOfGeneration;
      continue;
    }
    t->bytes[id] = tok.piece(id);
    t->kind[id] = t->bytes[id].empty() ? model::TokenTexts::Kind::Control : model::TokenTexts::Kind::Text;
  }
  return t;
}

}  // namespace weft::runtime
