// A model's reply text -> what the OpenAI API returns apart: content, reasoning_content and
// tool_calls, in the syntax of the model's family (tool_call_format.h), as llama-server's
// common_chat_parse splits it. Pure functions of text.
//
// A call is taken only when its JSON parses and names a function; anything else (a marker
// followed by invalid JSON, an unclosed call at the end) stays in the content as the model wrote
// it, as llama-server keeps text it cannot parse as a call.
//
// Streaming: parse the text so far with partial = true. What a partial parse returns is a prefix
// of what any longer text returns: content and reasoning grow only at their ends, and a call
// appears once it is complete and never changes. Text that may still become a marker (a prefix
// of <tool_call>, of </think>) or a call not yet closed is held back, so a stream never sends
// text that later turns out to start a tool call.
#pragma once

#include "chat/tool_call_format.h"

#include <string>
#include <string_view>
#include <vector>

namespace weft::chat {

struct ToolCall {
  std::string id;  // the model's own id (Mistral writes one); empty: the server assigns one
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI sends it
  bool operator==(const ToolCall&) const = default;
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;  // reasoning_content: <think>...</think>, harmony's analysis channel
  std::vector<ToolCall> tool_calls;
};

struct ParseOptions {
  OutputFormat format;
  bool parse_tools = true;     // false: tools were not offered (or tool_choice none)
  bool thinking_open = false;  // the prompt ended inside <think> (DeepSeek R1's generation prompt)
  bool partial = false;        // the text may continue: hold back what is not decided yet
};

ParsedOutput parse_output(std::string_view text, const ParseOptions& options);

}  // namespace weft::chat
