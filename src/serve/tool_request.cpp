#include "serve/tool_request.h"

#include "serve/http_error.h"
#include "serve/request.h"

namespace weft::serve {

namespace {

// tools[i]: {"type": "function", "function": {"name": ..., "description"?: ..., "parameters"?: {...}}}
void check_tool(const BodyJson& t, size_t i) {
  if (!t.is_object()) reject(400, "tools[{}] must be an object, got {}", i, t.type_name());
  if (field(t, "type") != "function") reject(400, "tools[{}].type must be \"function\"", i);
  const BodyJson& f = field(t, "function");
  if (!f.is_object()) reject(400, "tools[{}].function must be an object", i);
  const BodyJson& name = field(f, "name");
  if (!name.is_string() || name.get<std::string>().empty())
    reject(400, "tools[{}].function.name must be a non-empty string", i);
  if (const BodyJson& d = field(f, "description"); !d.is_null() && !d.is_string())
    reject(400, "tools[{}].function.description must be a string", i);
  if (const BodyJson& p = field(f, "parameters"); !p.is_null() && !p.is_object())
    reject(400, "tools[{}].function.parameters must be a JSON Schema object, got {}", i, p.type_name());
}

// messages[i].tool_calls[k]: {"id": ..., "type": "function", "function": {"name": ..., "arguments": "<json>"}}
void check_tool_call(const BodyJson& c, size_t i, size_t k) {
  if (!c.is_object()) reject(400, "messages[{}].tool_calls[{}] must be an object", i, k);
  if (const BodyJson& id = field(c, "id"); !id.is_null() && !id.is_string())
    reject(400, "messages[{}].tool_calls[{}].id must be a string", i, k);
  const BodyJson& f = field(c, "function");
  if (!f.is_object()) reject(400, "messages[{}].tool_calls[{}].function must be an object", i, k);
  if (!field(f, "name").is_string()) reject(400, "messages[{}].tool_calls[{}].function.name must be a string", i, k);
  const BodyJson& args = field(f, "arguments");
  const bool ok =
      args.is_object() || (args.is_string() && BodyJson::parse(args.get<std::string>(), nullptr, false).is_object());
  if (!ok) reject(400, "messages[{}].tool_calls[{}].function.arguments must be a JSON object's text", i, k);
}

// True when some message has tool_calls or is a tool result; checks their fields.
bool check_messages(const BodyJson& messages) {
  if (!messages.is_array()) return false;  // parse_messages names it
  bool any = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const BodyJson& m = messages[i];
    if (!m.is_object()) continue;
    const BodyJson& calls = field(m, "tool_calls");
    if (!calls.is_null()) {
      if (field(m, "role") != "assistant")
        reject(400, "messages[{}].tool_calls: only an assistant message has them", i);
      if (!calls.is_array()) reject(400, "messages[{}].tool_calls must be an array", i);
      for (size_t k = 0; k < calls.size(); ++k) check_tool_call(calls[k], i, k);
      any = true;
    }
    if (field(m, "role") == "tool") {
      if (const BodyJson& id = field(m, "tool_call_id"); !id.is_string())
        reject(400, "messages[{}].tool_call_id must be a string: a tool result names the call it answers", i);
      any = true;
    }
  }
  return any;
}

}  // namespace

BodyJson template_input(const BodyJson& messages, const std::vector<chat::Message>& plain) {
  BodyJson out = messages;
  for (size_t i = 0; i < out.size() && i < plain.size(); ++i)
    if (!field(out[i], "content").is_null()) out[i]["content"] = plain[i].content;
  return out;
}

ToolRequest parse_tool_request(const BodyJson& body) {
  ToolRequest r;
  if (check_messages(field(body, "messages"))) r.messages = body["messages"];
  const BodyJson& tools = field(body, "tools");
  if (!tools.is_null() && !tools.is_array()) reject(400, "'tools' must be an array, got {}", tools.type_name());
  if (tools.is_array())
    for (size_t i = 0; i < tools.size(); ++i) check_tool(tools[i], i);
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);

  const BodyJson& choice = field(body, "tool_choice");
  std::string mode = "auto";
  if (choice.is_string()) {
    mode = choice.get<std::string>();
    if (mode != "auto" && mode != "none" && mode != "required")
      reject(400,
             "'tool_choice' must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": "
             "{{\"name\": ...}}}}, got \"{}\"",
             mode);
  } else if (choice.is_object()) {
    const BodyJson& name = field(field(choice, "function"), "name");
    if (field(choice, "type") != "function" || !name.is_string())
      reject(400, "'tool_choice' must name a function as {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}");
    bool known = false;
    for (const auto& t : tools.is_array() ? tools : BodyJson::array()) known |= t["function"]["name"] == name;
    if (!known) reject(400, "'tool_choice' names function '{}', which is not in 'tools'", name.get<std::string>());
    mode = "function";
  } else if (!choice.is_null()) {
    reject(400, "'tool_choice' must be a string or an object, got {}", choice.type_name());
  }
  const bool has_tools = tools.is_array() && !tools.empty();
  if ((mode == "required" || mode == "function") && !has_tools)
    reject(400, "'tool_choice' asks for a tool call but 'tools' is empty");
  if (mode == "required") r.forced = "";
  if (mode == "function") r.forced = choice["function"]["name"].get<std::string>();
  if (has_tools && mode != "none") r.tools = tools;
  return r;
}

}  // namespace weft::serve
