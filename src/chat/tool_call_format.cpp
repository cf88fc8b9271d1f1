#include "chat/tool_call_format.h"

#include "core/error.h"

namespace weft::chat {
namespace {

bool has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

OutputFormat detect_output_format(std::string_view src) {
  OutputFormat f;
  // Order as llama.cpp tries them: harmony's channels first (common_chat_try_specialized_template),
  // then the marker each template writes around a call it renders.
  if (has(src, "<|channel|>")) {
    f.tools = ToolCallFormat::GptOss;
    return f;
  }
  f.think_tags = has(src, "<think>");
  if (has(src, "<｜tool▁calls▁begin｜>")) {
    f.tools = ToolCallFormat::DeepSeek;
  } else if (has(src, "[TOOL_CALLS]")) {
    f.tools = ToolCallFormat::Mistral;
  } else if (has(src, "<tool_call>")) {
    f.tools = ToolCallFormat::Hermes;
  } else if (has(src, "<|python_tag|>") || (has(src, "<|start_header_id|>") && has(src, "\"parameters\""))) {
    f.tools = ToolCallFormat::Llama3;
  }
  return f;
}

std::string_view format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::None: return "none";
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::GptOss: return "gpt-oss";
    case ToolCallFormat::DeepSeek: return "deepseek";
    case ToolCallFormat::Count: break;
  }
  WEFT_ASSERT(false);
  return "";
}

std::vector<std::string_view> tool_call_markers(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::Hermes: return {"<tool_call>"};
    case ToolCallFormat::Llama3: return {"<|python_tag|>"};
    case ToolCallFormat::Mistral: return {"[TOOL_CALLS]"};
    case ToolCallFormat::DeepSeek: return {"<｜tool▁calls▁begin｜>"};
    case ToolCallFormat::None:
    case ToolCallFormat::GptOss:
    case ToolCallFormat::Count: break;
  }
  return {};
}

}  // namespace weft::chat
