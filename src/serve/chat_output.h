// A chat reply split as llama-server splits it (its default --reasoning-format): content,
// reasoning_content and tool_calls (chat/tool_call_parser.h), for the whole reply and as the
// deltas of a stream.
#pragma once

#include "chat/chat_template.h"
#include "chat/tool_call_parser.h"
#include "serve/request.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::serve {

// The prompt text of a chat request: the template's plain render, or with tools, tool calls or
// tool results its render of OpenAI's messages (chat::Template::render_openai). A template that
// cannot render them (a built-in renderer, its own raise_exception) is a 400 saying why.
std::string chat_prompt(const chat::Template& tmpl, const ChatRequest& r);

// How to parse replies to `prompt` (rendered by `tmpl`), or nullopt when there is nothing to
// split: the template writes no reasoning tags and no tools are offered (the reply is content).
std::optional<chat::ParseOptions> chat_parse_options(const chat::Template& tmpl, bool with_tools,
                                                     std::string_view prompt);

// A fresh OpenAI-style call id ("call_" and 24 random alphanumerics).
std::string tool_call_id();

// The whole reply's message: role, content (null beside tool calls when empty),
// reasoning_content when there is some, tool_calls with ids. `parallel` false keeps the first call.
nlohmann::json chat_message(chat::ParsedOutput out, bool parallel);

// One streamed choice: its text so far, and the deltas each new piece decides.
class ChatDeltas {
 public:
  ChatDeltas(chat::ParseOptions options, bool parallel) : options_(options), parallel_(parallel) {}
  // Adds text (finished: the reply is complete) and returns the deltas now decided, in order:
  // reasoning_content, content, then per new call one delta naming it (index, id, type, name,
  // arguments "") and one with its arguments.
  std::vector<nlohmann::json> push(std::string_view text, bool finished);
  bool has_tool_calls() const { return !sent_.tool_calls.empty(); }

 private:
  chat::ParseOptions options_;
  bool parallel_;
  std::string text_;
  chat::ParsedOutput sent_;
};

}  // namespace weft::serve
