// A chat template in Jinja, parsed once and rendered as Hugging Face transformers renders it
// (trim_blocks, lstrip_blocks, loop controls, tojson, raise_exception, strftime_now): the entry
// point the chat layer uses to run a model's own tokenizer.chat_template, as llama.cpp's --jinja.
// Parsing and rendering throw weft::Error("chat") naming the template's line and column; a
// render is bounded by jinja::Limits, so a hostile template cannot hang or exhaust memory.
// A parsed template is immutable: renders may run on several threads at once.
#pragma once

#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace weft::chat {

struct Message;

struct JinjaRenderOptions {
  jinja::Limits limits;
  std::optional<std::tm> now;  // what strftime_now reads; the local time when unset
};

// The variables a chat template is given, as transformers' apply_chat_template and llama.cpp's
// common_chat_templates_apply pass them.
struct ChatContext {
  jinja::Value messages;  // a list of dicts: role, content (and tool_calls ... when a caller has them)
  jinja::Value tools;     // undefined when the request has none
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
  jinja::Dict extra;  // more variables (enable_thinking, reasoning_effort, ...)
};

class JinjaTemplate {
 public:
  explicit JinjaTemplate(std::string_view source);

  std::string render(const jinja::Dict& variables, const JinjaRenderOptions& options = {}) const;
  std::string render_chat(const ChatContext& context, const JinjaRenderOptions& options = {}) const;

 private:
  std::shared_ptr<const struct JinjaProgram> program_;
};

// Messages as the list of {role, content} dicts a template iterates.
jinja::Value messages_value(std::span<const Message> messages);

}  // namespace weft::chat
