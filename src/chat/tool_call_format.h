// Which tool-call syntax a model writes, and whether it thinks in <think> tags, decided from its
// chat template's text as llama.cpp's common_chat_templates_apply decides it (common/chat.cpp at
// a135ec0ba: specialised templates by marker substrings, the rest by what the template renders
// for a tool call). Each format's markers are the strings its parser looks for in the output.
#pragma once

#include <string_view>
#include <vector>

namespace weft::chat {

enum class ToolCallFormat {
  None,      // no tool syntax known: the output is content (and <think> reasoning, if any)
  Hermes,    // Hermes 2/3, Qwen 2.5, Qwen3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
  Llama3,    // Llama 3.1-3.3: {"name": ..., "parameters": {...}} (or after <|python_tag|>)
  Mistral,   // [TOOL_CALLS][{"name": ..., "arguments": {...}}] or [TOOL_CALLS]name[ARGS]{...}
  GptOss,    // harmony: <|channel|>commentary to=functions.NAME ...<|message|>{args}<|call|>
  DeepSeek,  // V3/R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...
  Count,
};

struct OutputFormat {
  ToolCallFormat tools = ToolCallFormat::None;
  bool think_tags = false;  // reasoning between <think> and </think> (Qwen3, QwQ, DeepSeek R1)
};

// The format a template's source writes tool calls and reasoning in.
OutputFormat detect_output_format(std::string_view template_source);
std::string_view format_name(ToolCallFormat f);
// The strings that start a tool call in f's output (empty for None and GptOss, whose calls are
// harmony messages).
std::vector<std::string_view> tool_call_markers(ToolCallFormat f);

}  // namespace weft::chat
