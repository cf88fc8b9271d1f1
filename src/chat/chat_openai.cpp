// Conversations in OpenAI's shape (tool calls, tool results, tools) on the Jinja template.
#include "chat/chat_template.h"
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"
#include "core/error.h"

namespace weft::chat {

nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    auto& m = out[i];
    if (!m.is_object() || !m.contains("tool_calls")) continue;
    auto& calls = m["tool_calls"];
    if (!calls.is_array()) continue;
    // llama.cpp's workaround for templates that concatenate content: "" where OpenAI allows null.
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
    for (size_t k = 0; k < calls.size(); ++k) {
      if (!calls[k].is_object() || !calls[k].contains("function")) continue;
      auto& fn = calls[k]["function"];
      if (!fn.is_object() || !fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      // func_args_not_string: templates index the arguments (tool_call.arguments.location).
      auto args = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      if (!args.is_object()) fail("chat", "messages[{}].tool_calls[{}].function.arguments is not a JSON object", i, k);
      fn["arguments"] = std::move(args);
    }
  }
  return out;
}

std::string Template::render_openai(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    bool add_generation_prompt, const nlohmann::ordered_json& kwargs) const {
  if (!jinja_)
    fail("chat", "tool calls need the model's own Jinja chat template; the built-in '{}' renderer has none", name());
  const bool with_tools = tools.is_array() && !tools.empty();
  ChatContext c;
  c.messages = jinja::from_json(template_messages(messages));
  if (with_tools) c.tools = jinja::from_json(tools);
  c.add_generation_prompt = add_generation_prompt;
  return run_jinja(with_tools && tool_use_ ? *tool_use_ : *jinja_, c, kwargs);
}

OutputFormat Template::output_format(bool with_tools) const {
  return with_tools && tool_use_ ? tool_use_format_ : format_;
}

}  // namespace weft::chat
