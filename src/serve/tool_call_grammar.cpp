#include "serve/tool_call_grammar.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "serve/http_error.h"

#include <fmt/format.h>

namespace weft::serve {

namespace {

using ordered = nlohmann::ordered_json;

// The schema of one call object: {"name": <one of the tools>, "<args_key>": <its parameters>}, the
// name first, as every one of these syntaxes writes it.
ordered call_schema(const nlohmann::json& tools, const std::string& name, const char* args_key) {
  ordered any_of = ordered::array();
  for (const auto& t : tools) {
    const nlohmann::json& f = t["function"];
    const std::string fn = f["name"];
    if (!name.empty() && fn != name) continue;
    // No parameters: any object, as OpenAI reads a function without them.
    const ordered params =
        f.contains("parameters") ? ordered::parse(f["parameters"].dump()) : ordered{{"type", "object"}};
    ordered call = {{"type", "object"},
                    {"properties", {{"name", {{"const", fn}}}, {args_key, params}}},
                    {"required", {"name", args_key}},
                    {"additionalProperties", false}};
    any_of.push_back(std::move(call));
  }
  return any_of.size() == 1 ? any_of[0] : ordered{{"anyOf", any_of}};
}

}  // namespace

std::shared_ptr<const model::Grammar> forced_call_grammar(chat::ToolCallFormat format, const nlohmann::json& tools,
                                                          const std::string& name, bool parallel) {
  using F = chat::ToolCallFormat;
  // Each syntax around the call object (the schema's grammar, rule "root"): the start rule and
  // whether calls are separated by a comma inside one list (Mistral) or stand one after another.
  std::string start;
  switch (format) {
    case F::Hermes:
      start = R"(tc-one ::= "<tool_call>" tc-ws root tc-ws "</tool_call>")";
      start += parallel ? "\ntool-calls ::= tc-one (tc-ws tc-one)*" : "\ntool-calls ::= tc-one";
      break;
    case F::Llama3: start = "tool-calls ::= root"; break;  // one JSON call: the syntax has no list
    case F::Mistral:
      start = parallel ? R"(tool-calls ::= "[TOOL_CALLS]" "[" root ("," tc-ws root)* "]")"
                       : R"(tool-calls ::= "[TOOL_CALLS]" "[" root "]")";
      break;
    default:
      reject(400,
             "'tool_choice' forces a call, which weft can constrain only in the Hermes/Qwen, Llama 3 and Mistral "
             "syntaxes; this model's template writes {}: use \"auto\"",
             chat::format_name(format));
  }
  std::string text;
  try {
    text = model::json_schema_to_grammar(call_schema(tools, name, format == F::Llama3 ? "parameters" : "arguments"));
  } catch (const Error& e) {
    reject(400, "'tools': a forced call's parameters cannot be enforced: {}", e.message());
  }
  text += start + "\ntc-ws ::= [ \\t\\n]{0,4}\n";
  return model::Grammar::parse(text, "tool-calls");
}

}  // namespace weft::serve
