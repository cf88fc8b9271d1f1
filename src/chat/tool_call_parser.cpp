#include "chat/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

namespace weft::chat {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_space(s[pos])) ++pos;
  return pos;
}

std::string_view trim(std::string_view s) {
  size_t b = skip_space(s, 0), e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Length of the longest suffix of s that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// How a piece of syntax starting at a position reads: complete (ending at `end`), cut off by the
// end of the text (more may make it complete), or definitely not what was expected.
enum class Status { Complete, Incomplete, Invalid };

// `lit` at pos: Complete (pos moved past it), Incomplete (the text ends inside it), Invalid.
Status expect(std::string_view s, size_t& pos, std::string_view lit) {
  const std::string_view rest = s.substr(pos);
  if (rest.starts_with(lit)) {
    pos += lit.size();
    return Status::Complete;
  }
  return lit.starts_with(rest) ? Status::Incomplete : Status::Invalid;
}

// A JSON object or array starting at pos: its end found by counting brackets outside strings,
// then parsed. Complete sets `value` and moves pos past it.
Status read_json(std::string_view s, size_t& pos, ordered_json& value) {
  if (pos >= s.size()) return Status::Incomplete;
  if (s[pos] != '{' && s[pos] != '[') return Status::Invalid;
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[')
      ++depth;
    else if (c == '}' || c == ']') {
      if (--depth > 0) continue;
      value = ordered_json::parse(s.substr(pos, i + 1 - pos), nullptr, false);
      if (value.is_discarded()) return Status::Invalid;
      pos = i + 1;
      return Status::Complete;
    }
  }
  return Status::Incomplete;
}

// A call's arguments as OpenAI sends them: an object's JSON text. Models write an object (or,
// some, a string holding one).
std::optional<std::string> arguments_text(const ordered_json& args) {
  if (args.is_object()) return args.dump();
  if (args.is_string()) {
    auto parsed = ordered_json::parse(args.get<std::string>(), nullptr, false);
    if (parsed.is_object()) return parsed.dump();
  }
  return std::nullopt;
}

// {"name": ..., <args_key>: {...}} (Hermes, Mistral's array, Llama's "parameters").
std::optional<ToolCall> call_from_json(const ordered_json& j, std::string_view args_key) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string key(args_key);
  if (!j.contains(key)) return std::nullopt;
  auto args = arguments_text(j[key]);
  if (!args) return std::nullopt;
  ToolCall c{.id = "", .name = j["name"].get<std::string>(), .arguments = *args};
  if (j.contains("id") && j["id"].is_string()) c.id = j["id"].get<std::string>();
  return c;
}

struct Calls {
  Status status = Status::Invalid;
  size_t end = 0;
  std::vector<ToolCall> calls;
};

Calls invalid() { return {}; }
Calls incomplete() { return {.status = Status::Incomplete}; }

// Status of the text after a call: Complete when `close` follows (or the text ends there and the
// whole text is in: models often stop at their end-of-turn token instead).
Calls close_call(std::string_view s, size_t pos, std::string_view close, bool partial, std::vector<ToolCall> calls) {
  pos = skip_space(s, pos);
  if (pos == s.size() && !partial) return {Status::Complete, pos, std::move(calls)};
  const Status st = expect(s, pos, close);
  if (st != Status::Complete) return {st == Status::Incomplete && partial ? Status::Incomplete : Status::Invalid};
  return {Status::Complete, pos, std::move(calls)};
}

// <tool_call>{"name": ..., "arguments": {...}}</tool_call>; pos is past the marker.
Calls hermes_call(std::string_view s, size_t pos, bool partial) {
  pos = skip_space(s, pos);
  ordered_json j;
  const Status st = read_json(s, pos, j);
  if (st != Status::Complete) return {st};
  auto call = call_from_json(j, "arguments");
  if (!call) return invalid();
  return close_call(s, pos, "</tool_call>", partial, {*call});
}

// <|python_tag|>{"name": ..., "parameters": {...}} or the same JSON alone; pos at the JSON.
Calls llama3_call(std::string_view s, size_t pos) {
  pos = skip_space(s, pos);
  ordered_json j;
  const Status st = read_json(s, pos, j);
  if (st != Status::Complete) return {st};
  auto call = call_from_json(j, "parameters");
  if (!call) call = call_from_json(j, "arguments");
  if (!call) return invalid();
  return {Status::Complete, pos, {*call}};
}

// [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}, ...] (Nemo) or
// [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} (Small 3.2; Devstral and Ministral without [CALL_ID]).
Calls mistral_call(std::string_view s, size_t pos) {
  pos = skip_space(s, pos);
  if (pos == s.size()) return incomplete();
  ordered_json j;
  if (s[pos] == '[') {
    const Status st = read_json(s, pos, j);
    if (st != Status::Complete) return {st};
    if (!j.is_array() || j.empty()) return invalid();
    std::vector<ToolCall> calls;
    for (const auto& e : j) {
      auto call = call_from_json(e, "arguments");
      if (!call) return invalid();
      calls.push_back(*call);
    }
    return {Status::Complete, pos, std::move(calls)};
  }
  ToolCall call;
  while (pos < s.size() && s[pos] != '[') call.name += s[pos++];
  call.name = std::string(trim(call.name));
  if (pos == s.size()) return incomplete();
  if (call.name.empty()) return invalid();
  Status st = expect(s, pos, "[CALL_ID]");
  if (st == Status::Incomplete) return incomplete();
  if (st == Status::Complete) {
    while (pos < s.size() && s[pos] != '[') call.id += s[pos++];
    if (pos == s.size()) return incomplete();
  }
  st = expect(s, pos, "[ARGS]");
  if (st != Status::Complete) return {st};
  st = read_json(s, pos, j);
  if (st != Status::Complete) return {st};
  auto args = arguments_text(j);
  if (!args) return invalid();
  call.arguments = *args;
  return {Status::Complete, pos, {call}};
}

// <｜tool▁calls▁begin｜> then calls, each <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
// <｜tool▁call▁end｜> (V3, R1) or <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1),
// then <｜tool▁calls▁end｜>; pos is past the first marker.
Calls deepseek_calls(std::string_view s, size_t pos, bool partial) {
  constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                             kCallEnd = "<｜tool▁call▁end｜>", kCallsEnd = "<｜tool▁calls▁end｜>";
  std::vector<ToolCall> calls;
  while (true) {
    pos = skip_space(s, pos);
    if (pos == s.size()) {
      if (partial || calls.empty()) return {partial ? Status::Incomplete : Status::Invalid};
      return {Status::Complete, pos, std::move(calls)};
    }
    size_t at = pos;
    Status st = expect(s, at, kCallsEnd);
    if (st == Status::Complete) return {Status::Complete, at, std::move(calls)};
    st = expect(s, pos, kCallBegin);
    if (st != Status::Complete) {
      if (partial && (st == Status::Incomplete || kCallsEnd.starts_with(s.substr(pos)))) return incomplete();
      return invalid();
    }
    const size_t sep = s.find(kSep, pos);
    if (sep == std::string_view::npos) return {partial ? Status::Incomplete : Status::Invalid};
    ToolCall call{.id = "", .name = std::string(trim(s.substr(pos, sep - pos))), .arguments = ""};
    pos = sep + kSep.size();
    const bool fenced = call.name == "function";
    if (fenced) {  // V3 / R1: the name, then the arguments in a json block
      const size_t nl = s.find('\n', pos);
      if (nl == std::string_view::npos) return {partial ? Status::Incomplete : Status::Invalid};
      call.name = std::string(trim(s.substr(pos, nl - pos)));
      pos = skip_space(s, nl);
      st = expect(s, pos, "```json");
      if (st != Status::Complete) return {st};
    }
    pos = skip_space(s, pos);
    ordered_json j;
    st = read_json(s, pos, j);
    if (st != Status::Complete) return {st};
    auto args = arguments_text(j);
    if (!args || call.name.empty()) return invalid();
    call.arguments = *args;
    pos = skip_space(s, pos);
    if (fenced && (st = expect(s, pos, "```")) != Status::Complete)
      return {st == Status::Incomplete && partial ? Status::Incomplete : Status::Invalid};
    Calls closed = close_call(s, pos, kCallEnd, partial, {});
    if (closed.status != Status::Complete) return closed;
    pos = closed.end;
    calls.push_back(std::move(call));
  }
}

// Finds the earliest of `markers` at or after pos; npos when none.
std::pair<size_t, std::string_view> find_marker(std::string_view s, size_t pos,
                                                const std::vector<std::string_view>& markers) {
  std::pair<size_t, std::string_view> best{std::string_view::npos, {}};
  for (auto m : markers) {
    const size_t at = s.find(m, pos);
    if (at < best.first) best = {at, m};
  }
  return best;
}

size_t held_marker_prefix(std::string_view s, const std::vector<std::string_view>& markers) {
  size_t held = 0;
  for (auto m : markers) held = std::max(held, partial_marker_suffix(s, m));
  return held;
}

// Content and the calls its markers introduce (every format but harmony's).
void parse_calls(std::string_view s, ToolCallFormat f, bool partial, ParsedOutput& out) {
  const auto markers = tool_call_markers(f);
  size_t pos = 0;
  // Llama 3.x also calls a tool with its JSON alone, when the reply starts with it.
  if (f == ToolCallFormat::Llama3) {
    const size_t start = skip_space(s, 0);
    if (start < s.size() && s[start] == '{') {
      Calls c = llama3_call(s, start);
      if (c.status == Status::Incomplete && partial) return;
      if (c.status == Status::Complete) {
        out.tool_calls = std::move(c.calls);
        pos = c.end;
      }
    } else if (start == s.size() && partial) {
      return;  // only space so far: the JSON may follow
    }
  }
  while (true) {
    auto [at, marker] = find_marker(s, pos, markers);
    if (at == std::string_view::npos) {
      std::string_view rest = s.substr(pos);
      if (partial) rest.remove_suffix(held_marker_prefix(rest, markers));
      out.content += rest;
      return;
    }
    out.content += s.substr(pos, at - pos);
    const size_t body = at + marker.size();
    Calls c;
    switch (f) {
      case ToolCallFormat::Hermes: c = hermes_call(s, body, partial); break;
      case ToolCallFormat::Llama3: c = llama3_call(s, body); break;
      case ToolCallFormat::Mistral: c = mistral_call(s, body); break;
      case ToolCallFormat::DeepSeek: c = deepseek_calls(s, body, partial); break;
      default: c = invalid(); break;
    }
    if (c.status == Status::Incomplete && partial) return;  // held back until it is decided
    if (c.status == Status::Complete) {
      for (auto& call : c.calls) out.tool_calls.push_back(std::move(call));
      pos = skip_space(s, c.end);  // the lines between and after calls are not content
    } else {                       // not a call: the marker stays text and the search goes on after it
      out.content += marker;
      pos = body;
    }
  }
}

// Harmony (gpt-oss): messages <|start|>assistant<|channel|>CHANNEL[ to=RECIPIENT]...<|message|>BODY,
// each ended by <|end|>, <|call|>, <|return|> or the next <|start|>. analysis is reasoning, a
// message to functions.NAME a call, the rest (final, commentary preambles) content.
void parse_harmony(std::string_view s, bool parse_tools, bool partial, ParsedOutput& out) {
  static const std::vector<std::string_view> kEnds = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
  static const std::vector<std::string_view> kStarts = {"<|start|>", "<|channel|>"};
  size_t pos = 0;
  while (pos < s.size()) {
    const std::string_view rest = s.substr(pos);
    if (!rest.starts_with("<|start|>") && !rest.starts_with("<|channel|>")) {
      if (partial && held_marker_prefix(rest, kStarts) == rest.size()) return;
      out.content += rest;  // not harmony: the model's text as it is
      return;
    }
    const size_t msg = s.find("<|message|>", pos);
    if (msg == std::string_view::npos) return;  // a header without a body: nothing to say yet
    const std::string_view header = s.substr(pos, msg - pos);
    auto word_after = [&](std::string_view key) {
      const size_t k = header.find(key);
      if (k == std::string_view::npos) return std::string_view();
      std::string_view w = header.substr(k + key.size());
      return w.substr(0, std::min(w.find_first_of(" <"), w.size()));
    };
    const std::string_view channel = word_after("<|channel|>"), recipient = word_after("to=");
    const size_t body = msg + std::string_view("<|message|>").size();
    const bool call = recipient.starts_with("functions.") && parse_tools;
    // A call's arguments are read as JSON first: a string in them may hold a marker's text.
    size_t json_end = skip_space(s, body);
    ordered_json j;
    const Status json_status = call ? read_json(s, json_end, j) : Status::Invalid;
    if (json_status == Status::Incomplete && partial) return;
    auto [end, marker] = find_marker(s, json_status == Status::Complete ? json_end : body, kEnds);
    const bool closed = end != std::string_view::npos;
    const size_t text_end = closed ? end : s.size();
    std::string_view text = s.substr(body, text_end - body);
    if (call) {
      if (!closed && partial) return;
      // Only space may follow the arguments in their message.
      auto args = json_status == Status::Complete && trim(s.substr(json_end, text_end - json_end)).empty()
                      ? arguments_text(j)
                      : std::nullopt;
      if (args)
        out.tool_calls.push_back({.id = "", .name = std::string(recipient.substr(10)), .arguments = *args});
      else
        out.content += text;
    } else {
      if (!closed && partial) text.remove_suffix(held_marker_prefix(text, kEnds));
      (channel == "analysis" ? out.reasoning : out.content) += text;
    }
    if (!closed) return;
    pos = marker == "<|start|>" ? end : end + marker.size();
  }
}

}  // namespace

ParsedOutput parse_output(std::string_view text, const ParseOptions& o) {
  ParsedOutput out;
  if (o.format.tools == ToolCallFormat::GptOss) {
    parse_harmony(text, o.parse_tools, o.partial, out);
    return out;
  }
  std::string_view rest = text;
  if (o.format.think_tags) {
    const size_t start = skip_space(text, 0);
    std::string_view after = text.substr(start);
    bool open = o.thinking_open;
    if (!open && after.starts_with(kThinkOpen)) {
      open = true;
      after.remove_prefix(kThinkOpen.size());
    } else if (!open && o.partial && kThinkOpen.starts_with(after)) {
      return out;  // may yet be <think>
    }
    if (open) {
      const size_t close = after.find(kThinkClose);
      if (close == std::string_view::npos) {
        std::string_view r = after;
        if (o.partial) r.remove_suffix(partial_marker_suffix(r, kThinkClose));
        // Trimmed whole or partial alike, so trailing space (it may be the last before </think>) is
        // held back until text follows it.
        out.reasoning = std::string(trim(r));
        return out;
      }
      out.reasoning = std::string(trim(after.substr(0, close)));
      rest = after.substr(close + kThinkClose.size());
      rest = rest.substr(skip_space(rest, 0));
      if (rest.empty() && o.partial) return out;
    }
  }
  if (!o.parse_tools || o.format.tools == ToolCallFormat::None) {
    out.content = std::string(rest);
    return out;
  }
  parse_calls(rest, o.format.tools, o.partial, out);
  return out;
}

}  // namespace weft::chat
