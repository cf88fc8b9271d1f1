#include "serve/chat_output.h"

#include "serve/http_error.h"

#include <random>

namespace weft::serve {

using nlohmann::json;

std::string chat_prompt(const chat::Template& tmpl, const ChatRequest& r) {
  if (!r.tools.any()) return tmpl.render(r.messages, /*add_generation_prompt=*/true, r.template_kwargs);
  try {
    return tmpl.render_openai(r.tools.messages, r.tools.tools, /*add_generation_prompt=*/true, r.template_kwargs);
  } catch (const Error& e) {
    reject(400, "the chat template cannot render this conversation with tools: {}", e.message());
  }
}

std::optional<chat::ParseOptions> chat_parse_options(const chat::Template& tmpl, bool with_tools,
                                                     std::string_view prompt) {
  const chat::OutputFormat f = tmpl.output_format(with_tools);
  const bool tools = with_tools && f.tools != chat::ToolCallFormat::None;
  // Harmony (gpt-oss) always: its analysis channel is reasoning (the tokenizer keeps the framing
  // tokens in a reply's text, as llama.cpp does).
  if (!f.think_tags && !tools && f.tools != chat::ToolCallFormat::GptOss) return std::nullopt;
  chat::ParseOptions o{.format = f, .parse_tools = tools, .thinking_open = false, .partial = false};
  // A generation prompt that opens <think> itself (DeepSeek R1's): the reply starts inside it.
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ')) prompt.remove_suffix(1);
  o.thinking_open = f.think_tags && prompt.ends_with("<think>");
  return o;
}

std::string tool_call_id() {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937 rng(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % kChars.size()];
  return id;
}

namespace {

json call_head(size_t index, const chat::ToolCall& c, const std::string& id) {
  return {{"index", index}, {"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}};
}

}  // namespace

json chat_message(chat::ParsedOutput out, bool parallel) {
  if (!parallel && out.tool_calls.size() > 1) out.tool_calls.resize(1);
  json m = {{"role", "assistant"}};
  m["content"] = out.content.empty() && !out.tool_calls.empty() ? json(nullptr) : json(out.content);
  if (!out.reasoning.empty()) m["reasoning_content"] = out.reasoning;
  if (!out.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : out.tool_calls)
      calls.push_back({{"id", c.id.empty() ? tool_call_id() : c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

std::vector<json> ChatDeltas::push(std::string_view text, bool finished) {
  text_ += text;
  chat::ParseOptions o = options_;
  o.partial = !finished;
  chat::ParsedOutput now = chat::parse_output(text_, o);
  if (!parallel_ && now.tool_calls.size() > 1) now.tool_calls.resize(1);
  // A later parse extends an earlier one (tool_call_parser.h), so the new text is what follows.
  auto grown = [](const std::string& before, const std::string& after) {
    return after.size() > before.size() && after.starts_with(before) ? after.substr(before.size()) : std::string();
  };
  std::vector<json> deltas;
  if (auto d = grown(sent_.reasoning, now.reasoning); !d.empty()) deltas.push_back({{"reasoning_content", d}});
  if (auto d = grown(sent_.content, now.content); !d.empty()) deltas.push_back({{"content", d}});
  for (size_t i = sent_.tool_calls.size(); i < now.tool_calls.size(); ++i) {
    const chat::ToolCall& c = now.tool_calls[i];
    deltas.push_back({{"tool_calls", json::array({call_head(i, c, c.id.empty() ? tool_call_id() : c.id)})}});
    deltas.push_back({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", c.arguments}}}}})}});
  }
  if (now.reasoning.starts_with(sent_.reasoning)) sent_.reasoning = now.reasoning;
  if (now.content.starts_with(sent_.content)) sent_.content = now.content;
  for (size_t i = sent_.tool_calls.size(); i < now.tool_calls.size(); ++i)
    sent_.tool_calls.push_back(now.tool_calls[i]);
  return deltas;
}

}  // namespace weft::serve
