// The tool-calling half of a /v1/chat/completions body: `tools` (OpenAI function tools),
// `tool_choice`, `parallel_tool_calls`, and messages carrying assistant tool_calls and role "tool"
// results. Each bad field is an HttpError(400) naming it.
#pragma once

#include "chat/chat_template.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace weft::serve {

struct ToolRequest {
  // The messages as OpenAI sent them, for chat::Template::render_openai; null when none carries
  // tool_calls or is a tool result (the plain messages then render as before).
  nlohmann::json messages;
  // The tools the template is given and the reply parsed for; null when none were sent or
  // tool_choice is "none".
  nlohmann::json tools;
  bool parallel_tool_calls = true;  // false: at most one call is returned
  // tool_choice "required" (empty: any tool) or a named function: the reply is forced to be a call
  // (serve/tool_call_grammar.h). Unset: the model decides.
  std::optional<std::string> forced;
  bool any() const { return !messages.is_null() || !tools.is_null(); }
};

// Reads and validates the fields above.
ToolRequest parse_tool_request(const nlohmann::json& body);

// The messages a template renders beside tools: as sent, each content the text parse_messages
// read from it (parts joined), null content left null (chat::template_messages decides).
nlohmann::json template_input(const nlohmann::json& messages, const std::vector<chat::Message>& plain);

}  // namespace weft::serve
