#include "runtime/token_texts.h"

namespace weft::runtime {

std::shared_ptr<const model::TokenTexts> token_texts(const tokenizer::Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(n);
  std::vector<model::TokenTexts::Kind> kind(n);
  for (Token id = 0; id < n; ++id) {
    if (tok.is_eog(id)) {
      kind[id] = model::TokenTexts::Kind::EndOfGeneration;
      continue;
    }
    bytes[id] = tok.piece(id);
    kind[id] = bytes[id].empty() ? model::TokenTexts::Kind::Control : model::TokenTexts::Kind::Text;
  }
  auto t = std::make_shared<model::TokenTexts>(std::move(bytes), std::move(kind));
  return t;
}

}  // namespace weft::runtime
