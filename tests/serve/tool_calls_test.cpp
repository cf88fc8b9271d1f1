// Tool calling in /v1/chat/completions: the request's tools, tool_choice and tool messages
// validated (each bad field a 400 naming it), and a reply split into OpenAI's message and stream
// deltas (chat_output.h) from a given model output: the tiny test models write random text, so
// the split is tested on the text a real model writes.
#include "serve/chat_output.h"
#include "serve/tool_request.h"
#include "test_server.h"

#include "support/expect_error.h"

#include <fstream>
#include <iterator>

namespace weft::serve::test_support {
namespace {

const json kWeather = json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather now", "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
    "required": ["location"]}}})");

json body_with(json fields) {
  json b = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})}};
  b.update(fields);
  return b;
}

TEST(ToolRequest, ToolsAndChoiceAreRead) {
  ToolRequest r = parse_tool_request(body_with({{"tools", {kWeather}}}));
  EXPECT_EQ(r.tools, json::array({kWeather}));
  EXPECT_TRUE(r.parallel_tool_calls);
  EXPECT_TRUE(r.any());
  r = parse_tool_request(body_with({{"tools", {kWeather}}, {"tool_choice", "none"}, {"parallel_tool_calls", false}}));
  EXPECT_TRUE(r.tools.is_null());  // none: the template is not given them and the reply not parsed
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_FALSE(parse_tool_request(body_with(json::object())).any());
}

TEST(ToolRequest, EachBadFieldIsNamed) {
  auto tool_with = [](const char* path, json v) {
    json t = kWeather;
    t[json::json_pointer(path)] = std::move(v);
    return body_with({{"tools", {t}}});
  };
  EXPECT_ERROR(parse_tool_request(body_with({{"tools", "get_weather"}})), "'tools' must be an array");
  EXPECT_ERROR(parse_tool_request(body_with({{"tools", {1}}})), "tools[0] must be an object");
  EXPECT_ERROR(parse_tool_request(tool_with("/type", "code")), "tools[0].type must be \"function\"");
  EXPECT_ERROR(parse_tool_request(tool_with("/function/name", "")), "tools[0].function.name must be a non-empty");
  EXPECT_ERROR(parse_tool_request(tool_with("/function/parameters", "x")), "tools[0].function.parameters must be");
  EXPECT_ERROR(parse_tool_request(tool_with("/function/description", 3)), "tools[0].function.description");
  EXPECT_ERROR(parse_tool_request(body_with({{"tools", {kWeather}}, {"tool_choice", "sometimes"}})),
               "'tool_choice' must be \"auto\"");
  EXPECT_ERROR(parse_tool_request(body_with({{"tools", {kWeather}}, {"tool_choice", 1}})),
               "'tool_choice' must be a string or an object");
  EXPECT_ERROR(parse_tool_request(body_with(
                   {{"tools", {kWeather}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}})),
               "names function 'f', which is not in 'tools'");
  EXPECT_ERROR(parse_tool_request(body_with({{"parallel_tool_calls", "yes"}})), "'parallel_tool_calls' must be");
}

TEST(ToolRequest, ForcedCallsNameTheirFunction) {
  EXPECT_EQ(parse_tool_request(body_with({{"tools", {kWeather}}, {"tool_choice", "required"}})).forced, "");
  EXPECT_EQ(
      parse_tool_request(body_with({{"tools", {kWeather}},
                                    {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}))
          .forced,
      "get_weather");
  EXPECT_FALSE(parse_tool_request(body_with({{"tools", {kWeather}}})).forced);
  EXPECT_ERROR(parse_tool_request(body_with({{"tool_choice", "required"}})), "but 'tools' is empty");
}

TEST(ToolRequest, ToolMessagesAreChecked) {
  json call = {{"id", "call_1"},
               {"type", "function"},
               {"function", {{"name", "get_weather"}, {"arguments", "{\"location\": \"Paris\"}"}}}};
  json msgs = json::array({{{"role", "user"}, {"content", "Weather?"}},
                           {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                           {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "22 C"}}});
  EXPECT_EQ(parse_tool_request({{"messages", msgs}}).messages, msgs);
  json bad = msgs;
  bad[1]["tool_calls"][0]["function"]["arguments"] = "{\"location\": ";
  EXPECT_ERROR(parse_tool_request({{"messages", bad}}), "messages[1].tool_calls[0].function.arguments must be");
  bad = msgs;
  bad[2].erase("tool_call_id");
  EXPECT_ERROR(parse_tool_request({{"messages", bad}}), "messages[2].tool_call_id must be a string");
  bad = msgs;
  bad[0]["tool_calls"] = {call};
  EXPECT_ERROR(parse_tool_request({{"messages", bad}}), "messages[0].tool_calls: only an assistant message");
  bad = msgs;
  bad[1]["tool_calls"][0]["function"].erase("name");
  EXPECT_ERROR(parse_tool_request({{"messages", bad}}), "messages[1].tool_calls[0].function.name must be");
}

// Parsing a whole reply of format f, tools offered.
chat::ParseOptions with_tools(chat::ToolCallFormat f, bool think_tags) {
  return {
      .format = {.tools = f, .think_tags = think_tags}, .parse_tools = true, .thinking_open = false, .partial = false};
}
const chat::ParseOptions kQwen3 = with_tools(chat::ToolCallFormat::Hermes, true);
const std::string kQwen3Reply =
    "<think>\nParis, so get_weather.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

TEST(ChatOutput, WholeReplyMessage) {
  const json m = chat_message(chat::parse_output(kQwen3Reply, kQwen3), /*parallel=*/true);
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["reasoning_content"], "Paris, so get_weather.");
  EXPECT_EQ(m["content"], "Checking.\n");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"location\":\"Paris\"}");
  EXPECT_TRUE(m["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
  EXPECT_NE(m["tool_calls"][0]["id"], m["tool_calls"][1]["id"]);
  const json one = chat_message(chat::parse_output(kQwen3Reply, kQwen3), /*parallel=*/false);
  EXPECT_EQ(one["tool_calls"].size(), 1u);
  // Only calls: content is null, as OpenAI sends it.
  const json calls_only =
      chat_message(chat::parse_output("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", kQwen3), true);
  EXPECT_TRUE(calls_only["content"].is_null());
  EXPECT_FALSE(calls_only.contains("reasoning_content"));
}

// The reply streamed in pieces of 1..4 bytes: the deltas add up to the whole reply, and each
// call comes as a delta naming it (index, id, type, name, arguments "") then its arguments.
TEST(ChatOutput, StreamDeltasAddUpToTheWholeReply) {
  for (size_t piece = 1; piece <= 4; ++piece) {
    ChatDeltas d(kQwen3, true);
    std::vector<json> all;
    for (size_t at = 0; at < kQwen3Reply.size(); at += piece)
      for (auto& j : d.push(std::string_view(kQwen3Reply).substr(at, piece), false)) all.push_back(j);
    for (auto& j : d.push("", true)) all.push_back(j);
    std::string content, reasoning;
    json calls = json::array();
    for (const auto& j : all) {
      EXPECT_EQ(j.size(), 1u) << j.dump();
      if (j.contains("content")) content += j["content"].get<std::string>();
      if (j.contains("reasoning_content")) reasoning += j["reasoning_content"].get<std::string>();
      if (!j.contains("tool_calls")) continue;
      const json& c = j["tool_calls"][0];
      const size_t index = c["index"].get<size_t>();
      if (c.contains("id")) {
        EXPECT_EQ(index, calls.size());
        EXPECT_EQ(c["type"], "function");
        EXPECT_EQ(c["function"]["arguments"], "");
        calls.push_back(c);
      } else {
        ASSERT_LT(index, calls.size());
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() + c["function"]["arguments"].get<std::string>();
      }
    }
    EXPECT_EQ(content, "Checking.\n");
    EXPECT_EQ(reasoning, "Paris, so get_weather.");
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[0]["function"]["arguments"], "{\"location\":\"Paris\"}");
    EXPECT_EQ(calls[1]["function"]["name"], "get_time");
    EXPECT_TRUE(d.has_tool_calls());
  }
}

// gpt-oss: the analysis channel streams as reasoning_content, the final channel as content, and a
// message to functions.NAME as a call, whatever the pieces.
TEST(ChatOutput, HarmonyStreamsReasoningContentAndCalls) {
  const chat::ParseOptions harmony = with_tools(chat::ToolCallFormat::GptOss, false);
  const std::string reply =
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}";
  for (size_t piece : {1, 5}) {
    ChatDeltas d(harmony, true);
    std::string reasoning, content, names;
    auto take = [&](const std::vector<json>& deltas) {
      for (const auto& j : deltas) {
        if (j.contains("reasoning_content")) reasoning += j["reasoning_content"].get<std::string>();
        if (j.contains("content")) content += j["content"].get<std::string>();
        if (j.contains("tool_calls") && j["tool_calls"][0].contains("id"))
          names += j["tool_calls"][0]["function"]["name"].get<std::string>();
      }
    };
    for (size_t at = 0; at < reply.size(); at += piece) take(d.push(std::string_view(reply).substr(at, piece), false));
    EXPECT_TRUE(names.empty());  // the call's end (<|call|>, an end-of-generation token) not seen yet
    take(d.push("", true));
    EXPECT_EQ(reasoning, "Need weather.");
    EXPECT_EQ(content, "");
    EXPECT_EQ(names, "get_weather");
  }
}

// No text that later starts a call is ever sent as content.
TEST(ChatOutput, StreamNeverSendsAMarkerAsContent) {
  ChatDeltas d(kQwen3, true);
  std::string content;
  const std::string reply = "Sure<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"<tool\"}}</tool_call>";
  for (char c : reply)
    for (auto& j : d.push(std::string(1, c), false))
      if (j.contains("content")) content += j["content"].get<std::string>();
  EXPECT_EQ(content, "Sure");
}

class ToolServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new weft::test_support::GeneratedModel();
    server_ = new TestServer(*model_->file, *model_->tok, weft::test_support::cpu_engine_options(1, 1, 256));
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  static inline weft::test_support::GeneratedModel* model_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

TEST_F(ToolServer, BadToolsAre400AndABuiltInTemplateCannotRenderTools) {
  auto c = server_->client();
  Reply r = post(c, "/v1/chat/completions", body_with({{"tools", {{{"type", "function"}}}}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("tools[0].function must be an object"), std::string::npos) << r.text;
  // The generated model has no template of its own: the built-in chatml renderer has no tools.
  r = post(c, "/v1/chat/completions", body_with({{"tools", {kWeather}}, {"max_tokens", 2}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("cannot render this conversation with tools"), std::string::npos) << r.text;
  // tool_choice none: no tools rendered, a plain reply.
  r = post(c, "/v1/chat/completions", body_with({{"tools", {kWeather}}, {"tool_choice", "none"}, {"max_tokens", 2}}));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_FALSE(r.body["choices"][0]["message"].contains("tool_calls"));
}

// tool_choice "required" or a named function on Qwen3's own template (Hermes <tool_call> syntax):
// the grammar makes the generated model's random text a call of the tool, its arguments following
// the tool's schema, whole and streamed.
class ForcedToolCall : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new weft::test_support::GeneratedModel();
    std::ifstream f(std::string(WEFT_SOURCE_DIR) + "/tests/data/chat_templates/Qwen-Qwen3-0.6B.jinja");
    const std::string qwen3((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    server_ =
        new TestServer(*model_->file, *model_->tok, weft::test_support::cpu_engine_options(1, 1, 2048), {}, {}, qwen3);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  static json request(const json& tool_choice) {
    const json add = json::parse(R"({"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"], "additionalProperties": false}}})");
    return body_with({{"tools", {kWeather, add}},
                      {"tool_choice", tool_choice},
                      {"parallel_tool_calls", false},
                      {"max_tokens", 400},
                      {"temperature", 0.8},
                      {"seed", 5}});
  }
  static inline weft::test_support::GeneratedModel* model_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

TEST_F(ForcedToolCall, TheReplyIsACallWhoseArgumentsFollowTheSchema) {
  auto c = server_->client();
  for (const char* name : {"get_weather", "add"}) {
    const Reply r = post(c, "/v1/chat/completions", request({{"type", "function"}, {"function", {{"name", name}}}}));
    ASSERT_EQ(r.status, 200) << r.text;
    const json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.text;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.text;
    const json& fn = choice["message"]["tool_calls"][0]["function"];
    EXPECT_EQ(fn["name"], name);
    const json args = json::parse(fn["arguments"].get<std::string>());
    if (std::string(name) == "add") {
      EXPECT_EQ(args.size(), 2u) << args.dump();
      EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << args.dump();
    } else {
      EXPECT_TRUE(args["location"].is_string()) << args.dump();
    }
  }
  const Reply any = post(c, "/v1/chat/completions", request("required"));
  ASSERT_EQ(any.status, 200) << any.text;
  EXPECT_EQ(any.body["choices"][0]["finish_reason"], "tool_calls") << any.text;
  ASSERT_EQ(any.body["choices"][0]["message"]["tool_calls"].size(), 1u) << any.text;
}

TEST_F(ForcedToolCall, StreamedAsOneCallDelta) {
  auto c = server_->client();
  json body = request("required");
  body["stream"] = true;
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  std::string name, arguments, finish;
  for (const auto& p : sse_payloads(r.text)) {
    if (p == "[DONE]") continue;
    const json chunk = json::parse(p);
    if (chunk["choices"].empty()) continue;
    const json& ch = chunk["choices"][0];
    if (ch["delta"].contains("tool_calls")) {
      const json& fn = ch["delta"]["tool_calls"][0]["function"];
      if (fn.contains("name")) name += fn["name"].get<std::string>();
      arguments += fn.value("arguments", "");
    }
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
  }
  EXPECT_TRUE(name == "get_weather" || name == "add") << name;
  EXPECT_TRUE(json::parse(arguments, nullptr, false).is_object()) << arguments;
  EXPECT_EQ(finish, "tool_calls");
}

// A tool's parameters keep the request's order: the template lists them so, and a forced call's
// arguments come in it (the body sent as text, its properties out of alphabetical order).
TEST_F(ForcedToolCall, ParametersKeepTheRequestsOrder) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "boolean"}},
      "required": ["zeta", "alpha"], "additionalProperties": false}}}])";
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  auto c = server_->client();
  const Reply prompt = post(c, "/apply-template", "{" + messages + ", " + tools + "}");
  ASSERT_EQ(prompt.status, 200) << prompt.text;
  const std::string p = prompt.body["prompt"];
  EXPECT_LT(p.find("zeta"), p.find("alpha")) << p;
  const Reply r =
      post(c, "/v1/chat/completions",
           "{" + messages + ", " + tools +
               R"(, "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 400, "seed": 5})");
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["choices"][0]["message"]["tool_calls"].size(), 1u) << r.text;
  const auto args = nlohmann::ordered_json::parse(
      r.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  std::vector<std::string> keys;
  for (const auto& item : args.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha"})) << args.dump();
}

TEST_F(ForcedToolCall, WithAResponseFormatToo400) {
  auto c = server_->client();
  json body = request("required");
  body["response_format"] = {{"type", "json_object"}};
  const Reply r = post(c, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_message(r).find("'response_format' cannot constrain the reply too"), std::string::npos) << r.text;
}

}  // namespace
}  // namespace weft::serve::test_support
