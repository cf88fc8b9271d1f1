#include "serve/chat_format.h"

#include "core/error.h"

namespace weft::serve {

// Interim: chatml only, until the chat layer (src/chat) brings llama.cpp's template detection.
ChatFormat ChatFormat::from_gguf(const gguf::File& file, const std::string& name) {
  ChatFormat f;
  if (!name.empty()) {
    if (name != "chatml") fail("cli", "--chat-template {}: unknown template (known: chatml)", name);
    f.name_ = name;
    return f;
  }
  const auto tmpl = file.get_string_opt("tokenizer.chat_template");
  if (tmpl && tmpl->find("<|im_start|>") == std::string::npos)
    fail("cli",
         "the model's chat template (tokenizer.chat_template) is not recognised; name one with --chat-template "
         "(known: chatml)");
  f.name_ = "chatml";
  return f;
}

std::string ChatFormat::apply(const std::vector<ChatMessage>& messages, bool add_assistant) const {
  std::string out;
  for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_assistant) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace weft::serve
