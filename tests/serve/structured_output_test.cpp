// Structured output on stories260K: response_format (json_object, json_schema) and llama-server's
// grammar / json_schema fields constrain the reply, whole and streamed, and every bad value or
// schema part weft cannot enforce is a 400 naming it.
#include "test_server.h"

#include <regex>

namespace weft::serve::test_support {
namespace {

const json kSchema = {{"type", "object"},
                      {"properties",
                       {{"ok", {{"type", "boolean"}}},
                        {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}},
                        {"tags", {{"type", "array"}, {"items", {{"enum", {"a", "b"}}}}, {"maxItems", 2}}}}},
                      {"required", {"ok", "n", "tags"}},
                      {"additionalProperties", false}};

class StructuredOutput : public StoriesServer {
 protected:
  static Reply chat(const json& extra, int max_tokens = 200) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", max_tokens}};
    body.update(extra);
    auto c = server_->client();
    return post(c, "/v1/chat/completions", body);
  }
  static Reply complete(const json& extra) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 60}};
    body.update(extra);
    auto c = server_->client();
    return post(c, "/v1/completions", body);
  }
  // The reply's text parsed; it must have ended by itself (the grammar complete).
  static json parsed(const Reply& r, const std::string& text) {
    EXPECT_EQ(r.status, 200) << r.text;
    return json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  static void expect_valid(const json& v) {
    ASSERT_TRUE(v.is_object()) << v.dump();
    EXPECT_EQ(v.size(), 3u) << v.dump();
    EXPECT_TRUE(v["ok"].is_boolean()) << v.dump();
    ASSERT_TRUE(v["n"].is_number_integer()) << v.dump();
    EXPECT_GE(v["n"].get<int>(), 0);
    EXPECT_LE(v["n"].get<int>(), 9);
    ASSERT_TRUE(v["tags"].is_array()) << v.dump();
    EXPECT_LE(v["tags"].size(), 2u);
    for (const auto& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b") << v.dump();
  }
};

TEST_F(StructuredOutput, JsonSchemaRepliesValidateGreedyAndSampled) {
  const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "answer"}, {"schema", kSchema}}}};
  for (double temp : {0.0, 0.8, 1.5}) {
    const Reply r = chat({{"response_format", rf}, {"temperature", temp}, {"seed", 7}});
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop") << r.text;
    expect_valid(parsed(r, r.body["choices"][0]["message"]["content"].get<std::string>()));
  }
}

// The reply's keys come in the schema's order, as OpenAI and llama-server write them: the body is
// sent as text, its properties out of alphabetical order (a sorted parse of the body loses it).
TEST_F(StructuredOutput, KeysComeInTheSchemasOrder) {
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 200, "seed": 3,
      "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object",
        "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "boolean"}, "mid": {"enum": ["x", "y"]}},
        "required": ["zeta", "alpha", "mid"], "additionalProperties": false}}}})";
  auto c = server_->client();
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  const auto v = nlohmann::ordered_json::parse(r.body["choices"][0]["message"]["content"].get<std::string>(), nullptr,
                                               /*allow_exceptions=*/false);
  ASSERT_TRUE(v.is_object()) << r.text;
  std::vector<std::string> keys;
  for (const auto& item : v.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"})) << v.dump();
}

TEST_F(StructuredOutput, StreamedSchemaReplyAddsUpToAValidObject) {
  auto c = server_->client();
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 200},
                     {"temperature", 0},
                     {"stream", true},
                     {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", kSchema}}}}}};
  const Reply r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  std::string text;
  std::string finish;
  for (const auto& p : sse_payloads(r.text)) {
    if (p == "[DONE]") continue;
    const json chunk = json::parse(p);
    const json& ch = chunk["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(finish, "stop") << text;
  expect_valid(parsed(r, text));
}

// Any object: the tiny model goes on adding members, so only the reply's start is certain.
TEST_F(StructuredOutput, JsonObjectStartsAnObject) {
  const Reply r = chat({{"response_format", {{"type", "json_object"}}}, {"temperature", 0}}, 6);
  ASSERT_EQ(r.status, 200) << r.text;
  const std::string text = r.body["choices"][0]["message"]["content"];
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(^\s*\{)"))) << text;
}

TEST_F(StructuredOutput, GrammarAndSchemaFieldsOnCompletions) {
  Reply r = complete({{"grammar", R"(root ::= ("yes" | "no") " " [0-9]{1,3})"}, {"temperature", 0.9}, {"seed", 3}});
  ASSERT_EQ(r.status, 200) << r.text;
  const std::string text = r.body["choices"][0]["text"];
  EXPECT_TRUE(std::regex_match(text, std::regex("(yes|no) [0-9]{1,3}"))) << text;
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  r = complete({{"json_schema", kSchema}, {"max_tokens", 200}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.text;
  expect_valid(parsed(r, r.body["choices"][0]["text"].get<std::string>()));
}

TEST_F(StructuredOutput, BadValuesAreRefusedNamingThePart) {
  auto refused = [](const Reply& r) {
    EXPECT_EQ(r.status, 400) << r.text;
    return error_message(r);
  };
  EXPECT_EQ(refused(chat(
                {{"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}})),
            "'response_format.json_schema.schema': keyword 'pattern' is not supported at /pattern");
  EXPECT_EQ(refused(chat({{"response_format", {{"type", "xml"}}}})),
            "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"xml\"");
  EXPECT_EQ(refused(chat({{"response_format", {{"type", "json_schema"}}}})),
            "'response_format.json_schema' must be an object holding 'schema'");
  EXPECT_EQ(refused(chat({{"response_format", "json"}})), "'response_format' must be an object, got string");
  EXPECT_EQ(refused(complete({{"grammar", "root ::= \"a\" x"}})), "'grammar': at 1:14: undefined rule 'x'");
  EXPECT_EQ(refused(complete({{"grammar", 3}})), "'grammar' must be a string (GBNF), got number");
  EXPECT_EQ(refused(complete({{"grammar", "root ::= \"a\""}, {"json_schema", kSchema}})),
            "'response_format', 'json_schema' and 'grammar' each constrain the reply: send one of them");
  // response_format "text" constrains nothing.
  EXPECT_EQ(chat({{"response_format", {{"type", "text"}}}}, 4).status, 200);
}

}  // namespace
}  // namespace weft::serve::test_support
