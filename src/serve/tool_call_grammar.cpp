#include "serve/tool_call_grammar.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "serve/http_error.h"

#include <fmt/format.h>

#include <vector>

namespace weft::serve {

namespace {

using ordered = nlohmann::ordered_json;
using F = chat::ToolCallFormat;

// A function without parameters takes any object, as OpenAI reads it.
ordered parameters(const BodyJson& function) {
  return function.contains("parameters") ? function["parameters"] : ordered{{"type", "object"}};
}

// The schema of one call object: {"name": <one of the tools>, "<args_key>": <its parameters>}, the
// name first, as every JSON call syntax writes it.
ordered call_schema(const BodyJson& tools, const std::string& name, const char* args_key) {
  ordered any_of = ordered::array();
  for (const auto& t : tools) {
    const std::string fn = t["function"]["name"];
    if (!name.empty() && fn != name) continue;
    ordered call = {{"type", "object"},
                    {"properties", {{"name", {{"const", fn}}}, {args_key, parameters(t["function"])}}},
                    {"required", {"name", args_key}},
                    {"additionalProperties", false}};
    any_of.push_back(std::move(call));
  }
  return any_of.size() == 1 ? any_of[0] : ordered{{"anyOf", any_of}};
}

// A function the call may name, its name written outside the JSON (harmony, DeepSeek), and the
// rule of its arguments.
struct Callee {
  std::string name;
  std::string args_rule;
};

// The callable tools, each one's arguments rule (tc-args-N) added to `rules`.
std::vector<Callee> callees(const BodyJson& tools, const std::string& name, F format, model::JsonSchemaRules& rules) {
  std::vector<Callee> out;
  for (const auto& t : tools) {
    const std::string fn = t["function"]["name"];
    if (!name.empty() && fn != name) continue;
    // The parsers end a name at a space or a marker.
    if (fn.find_first_of(" \t\r\n<") != std::string::npos)
      reject(400, "'tools': the function name '{}' cannot be written in this model's {} call syntax", fn,
             chat::format_name(format));
    Callee c{fn, fmt::format("tc-args-{}", out.size())};
    try {
      rules.add(c.args_rule, parameters(t["function"]));
    } catch (const Error& e) {
      reject(400, "'tools': the parameters of '{}' cannot be enforced in a forced call: {}", fn, e.message());
    }
    out.push_back(std::move(c));
  }
  return out;
}

// `per_callee(c)` for each callee, as alternatives.
template <typename Fn>
std::string alternatives(const std::vector<Callee>& cs, Fn per_callee) {
  std::string out;
  for (const auto& c : cs) out += (out.empty() ? "" : " | ") + per_callee(c);
  return "(" + out + ")";
}

// Rules `name`, `name-1`, ... deriving every text that does not contain `marker` (ASCII, its first
// character found in it only there): the automaton that tracks how much of the marker the text
// ends with, state i (the last i characters are its first i) written as rule `name-i`.
std::string text_without(const std::string& name, std::string_view marker) {
  const auto state = [&](size_t i) { return i == 0 ? name : fmt::format("{}-{}", name, i); };
  const auto not_class = [](std::string_view chars) {
    std::string out = "[^";
    for (char c : chars) {
      if (c == ']' || c == '\\' || c == '^' || c == '-') out += '\\';
      out += c;
    }
    return out + "]";
  };
  const std::string first = model::gbnf_literal(marker.substr(0, 1));
  std::string out =
      fmt::format("{} ::= ({} {} | {} {})?\n", state(0), not_class(marker.substr(0, 1)), state(0), first, state(1));
  for (size_t i = 1; i < marker.size(); ++i) {
    std::string alts =
        fmt::format("{} {} | {} {}", first, state(1), not_class(std::string{marker[0], marker[i]}), state(0));
    if (i + 1 < marker.size()) alts += fmt::format(" | {} {}", model::gbnf_literal(marker.substr(i, 1)), state(i + 1));
    out += fmt::format("{} ::= ({})?\n", state(i), alts);
  }
  return out;
}

// gpt-oss (harmony): the reply may open with analysis (reasoning) or commentary (preamble)
// messages, each ended by <|end|> and the next <|start|>assistant, before the message to
// functions.NAME that is the call, the recipient in the channel's header or in the role's (after a
// <|start|>). <|call|> ends the generation, so a reply holds one call. Message text holds no "<|"
// (it would start a framing token).
std::string harmony_grammar(const std::vector<Callee>& cs) {
  const auto call = [](const char* after_name) {
    return [=](const Callee& c) {
      return fmt::format("{} {} tc-constrain \"<|message|>\" {}", model::gbnf_literal(c.name), after_name, c.args_rule);
    };
  };
  std::string g = "tool-calls ::= tc-call-channel | tc-message tc-next\n";
  g += "tc-next ::= \"<|end|><|start|>assistant\" (tc-call-channel | tc-call-role | tc-message tc-next)\n";
  g += "tc-message ::= \"<|channel|>\" (\"analysis\" | \"commentary\") \"<|message|>\" tc-text\n";
  g += "tc-channel ::= \"<|channel|>\" (\"commentary\" | \"analysis\")\n";
  g += "tc-call-channel ::= tc-channel \" to=functions.\" " + alternatives(cs, call("")) + "\n";
  g += "tc-call-role ::= \" to=functions.\" " + alternatives(cs, call("tc-channel")) + "\n";
  g += "tc-constrain ::= (\" \" \"<|constrain|>\"? tc-type | \"<|constrain|>\" tc-type)?\n";
  g += "tc-type ::= [A-Za-z0-9_-]{1,32}\n";
  return g + text_without("tc-text", "<|");
}

// DeepSeek: <｜tool▁calls▁begin｜>, then each call <｜tool▁call▁begin｜>...<｜tool▁call▁end｜> in V3/R1's
// syntax (function<｜tool▁sep｜>NAME, the arguments in a json block) or V3.1's (NAME<｜tool▁sep｜>
// arguments), then <｜tool▁calls▁end｜>. Both are allowed whatever the template: the model writes
// its own.
std::string deepseek_grammar(const std::vector<Callee>& cs, bool parallel) {
  std::vector<Callee> plain;  // V3.1's syntax cannot name "function": its parser reads a V3 call
  for (const auto& c : cs)
    if (c.name != "function") plain.push_back(c);
  std::string g = "tool-calls ::= \"<｜tool▁calls▁begin｜>\" tc-one ";
  g += parallel ? "(tc-ws tc-one)* tc-ws \"<｜tool▁calls▁end｜>\"\n" : "tc-ws \"<｜tool▁calls▁end｜>\"\n";
  g += std::string("tc-one ::= \"<｜tool▁call▁begin｜>\" (tc-fenced") + (plain.empty() ? "" : " | tc-plain") +
       ") tc-ws \"<｜tool▁call▁end｜>\"\n";
  g +=
      "tc-fenced ::= \"function<｜tool▁sep｜>\" " +
      alternatives(cs,
                   [](const Callee& c) {
                     return fmt::format("{} \"\\n```json\\n\" {} \"\\n```\"", model::gbnf_literal(c.name), c.args_rule);
                   }) +
      "\n";
  if (!plain.empty())
    g += "tc-plain ::= " +
         alternatives(plain,
                      [](const Callee& c) {
                        return fmt::format("{} \"<｜tool▁sep｜>\" {}", model::gbnf_literal(c.name), c.args_rule);
                      }) +
         "\n";
  return g;
}

}  // namespace

std::shared_ptr<const model::Grammar> forced_call_grammar(chat::ToolCallFormat format, bool thinking_open,
                                                          const BodyJson& tools, const std::string& name,
                                                          bool parallel) {
  // Each syntax around the call (rule "tool-calls"): for the JSON ones, the call object's schema
  // (rule "root") inside its markers, calls separated by a comma inside one list (Mistral) or
  // standing one after another.
  std::string text;
  const auto json_call = [&](const char* args_key, std::string start) {
    try {
      text = model::json_schema_to_grammar(call_schema(tools, name, args_key));
    } catch (const Error& e) {
      reject(400, "'tools': a forced call's parameters cannot be enforced: {}", e.message());
    }
    text += start;
  };
  model::JsonSchemaRules args;
  switch (format) {
    case F::Hermes:
      json_call("arguments", std::string(R"(tc-one ::= "<tool_call>" tc-ws root tc-ws "</tool_call>")") +
                                 (parallel ? "\ntool-calls ::= tc-one (tc-ws tc-one)*" : "\ntool-calls ::= tc-one"));
      break;
    case F::Llama3: json_call("parameters", "tool-calls ::= root"); break;  // one JSON call: the syntax has no list
    case F::Mistral:
      json_call("arguments", parallel ? R"(tool-calls ::= "[TOOL_CALLS]" "[" root ("," tc-ws root)* "]")"
                                      : R"(tool-calls ::= "[TOOL_CALLS]" "[" root "]")");
      break;
    case F::GptOss:
      text = harmony_grammar(callees(tools, name, format, args));
      text += args.text();  // after callees() added them
      break;
    case F::DeepSeek:
      text = deepseek_grammar(callees(tools, name, format, args), parallel);
      text += args.text();
      break;
    default:
      reject(400,
             "'tool_choice' forces a call, which this model's template does not write in a syntax weft knows "
             "({}): use \"auto\"",
             chat::format_name(format));
  }
  text += "\ntc-ws ::= [ \\t\\n]{0,4}\n";
  // A generation prompt that opened <think> (DeepSeek R1's): the reasoning, closed, comes first.
  if (!thinking_open) return model::Grammar::parse(text, "tool-calls");
  text += "tc-reply ::= tc-think \"</think>\" tc-ws tool-calls\n" + text_without("tc-think", "</think>");
  return model::Grammar::parse(text, "tc-reply");
}

}  // namespace weft::serve
