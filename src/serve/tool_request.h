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

// A request body as sent: its objects keep their keys' order, as OpenAI and llama-server keep it (a
// schema's properties, a tool's parameters: the template shows them, and a constrained reply
// writes them, in that order).
using BodyJson = nlohmann::ordered_json;

struct ToolRequest {
  // The messages as OpenAI sent them, for chat::Template::render_openai; null when none carries
  // tool_calls or is a tool result (the plain messages then render as before).
  BodyJson messages;
  // The tools the template is given and the reply parsed for; null when none were sent or
  // tool_choice is "none".
  BodyJson tools;
  bool parallel_tool_calls = true;  // false: at most one call is returned
  // tool_choice "required" (empty: any tool) or a named function: the reply is forced to be a call
  // (serve/tool_call_grammar.h). Unset: the model decides.
  std::optional<std::string> forced;
  bool any() const { return !messages.is_null() || !tools.is_null(); }
};

// Reads and validates the fields above.
ToolRequest parse_tool_request(const BodyJson& body);

// The messages a template renders beside tools: as sent, each content the text parse_messages
// read from it (parts joined), null content left null (chat::template_messages decides).
BodyJson template_input(const BodyJson& messages, const std::vector<chat::Message>& plain);

}  // namespace weft::serve
