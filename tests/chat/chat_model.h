// The chat tests' model: gen-model's tiny preset carrying a template family and its control
// tokens, in memory (the bytes stay alive: gguf::File reads them in place).
#pragma once

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace weft::chat::test_support {

struct ChatModel {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  Template tmpl;

  explicit ChatModel(Family family) : tmpl(family) {
    tools::GenModelOptions o;
    o.chat_template = std::string(tmpl.name());
    for (std::string_view m : tmpl.markers()) o.control_tokens.emplace_back(m);
    bytes = tools::generate_model_bytes(o);
    file = gguf::File::parse(bytes.data(), bytes.size());
    tok = tokenizer::Tokenizer::from_gguf(*file);
  }
  // The id of a special token's text.
  Token id(const std::string& special) const {
    const std::vector<Token> ids = tok->encode(special, false, true);
    EXPECT_EQ(ids.size(), 1u) << special;
    return ids.empty() ? -1 : ids[0];
  }
  std::vector<Token> encode(const std::string& text, bool first) const { return tok->encode(text, first, true); }
};

}  // namespace weft::chat::test_support
