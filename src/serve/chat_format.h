// Chat messages -> prompt text, by the model's chat template. A thin seam: the server calls only
// this, so the template engine behind it can change without touching the endpoints.
#pragma once

#include "gguf/gguf_reader.h"

#include <string>
#include <vector>

namespace weft::serve {

struct ChatMessage {
  std::string role;  // system | user | assistant | ...
  std::string content;
};

class ChatFormat {
 public:
  // `name` (--chat-template) picks a template; empty: the one the GGUF's tokenizer.chat_template
  // holds, as llama.cpp detects it (chatml when the file has none). An unknown name, or a file's
  // template that is not recognised, is a weft::Error naming --chat-template.
  static ChatFormat from_gguf(const gguf::File& file, const std::string& name);

  const std::string& name() const { return name_; }
  // The prompt for `messages`, ending with the assistant's turn opened when add_assistant.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_assistant = true) const;

 private:
  std::string name_;
};

}  // namespace weft::serve
