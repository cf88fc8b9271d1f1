// Forced tool calls in gpt-oss's harmony and DeepSeek's syntaxes (serve/tool_call_grammar.h): the
// grammar derives the replies the family's models write (reasoning or preambles first where they
// may, the recipient where harmony puts it, V3's and V3.1's call syntaxes) and nothing but a call,
// each one parsing to the call (chat/tool_call_parser.h); then through the server on a generated
// model with the family's template and its framing tokens in the vocabulary.
#include "serve/tool_call_grammar.h"
#include "chat/tool_call_parser.h"
#include "test_server.h"

#include "gguf/gguf_writer.h"
#include "support/expect_error.h"

#include <algorithm>
#include <fstream>
#include <iterator>

namespace weft::serve::test_support {
namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {"type": "object",
    "properties": {"location": {"type": "string"}}, "required": ["location"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
    "additionalProperties": false}}}])");

using chat::ToolCallFormat;

// The calls parse_output reads from a whole reply of format f.
std::vector<chat::ToolCall> calls_in(const std::string& reply, ToolCallFormat f, bool thinking_open = false) {
  const chat::ParseOptions o{.format = {.tools = f, .think_tags = f == ToolCallFormat::DeepSeek},
                             .parse_tools = true,
                             .thinking_open = thinking_open,
                             .partial = false};
  return chat::parse_output(reply, o).tool_calls;
}

TEST(ForcedCallGrammar, HarmonyDerivesReasoningFirstAndEitherRecipientPlace) {
  const auto g = forced_call_grammar(ToolCallFormat::GptOss, false, kTools, "", true);
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"location\": \"Paris\"}";
  for (const std::string& reply :
       {call, "<|channel|>analysis<|message|>User wants weather; a < b.<|end|><|start|>assistant" + call,
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking."
        "<|end|><|start|>assistant" +
            call,
        std::string("<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.add<|channel|>commentary "
                    "json<|message|>{\"a\":1,\"b\":2}")}) {
    EXPECT_TRUE(model::grammar_matches(g, reply)) << reply;
    EXPECT_EQ(calls_in(reply, ToolCallFormat::GptOss).size(), 1u) << reply;
  }
  for (const std::string& reply : {
           std::string("<|channel|>final<|message|>Sunny."),                         // an answer, no call
           std::string("<|channel|>analysis<|message|>x<|end|>"),                    // no call after it
           std::string("<|channel|>analysis<|message|>x<|start|>assistant") + call,  // <|end|> left out
           std::string("<|channel|>analysis<|message|>x<|channel|>y<|end|><|start|>assistant") + call,
           std::string("<|channel|>commentary to=functions.get_time<|message|>{}"),           // no such tool
           std::string("<|channel|>commentary to=functions.add<|message|>{\"a\": \"one\"}"),  // off its schema
           std::string(
               " to=functions.add<|channel|>commentary<|message|>{\"a\": 1, \"b\": 2}")  // role first: after a start
       })
    EXPECT_FALSE(model::grammar_matches(g, reply)) << reply;
  // A named function: only it.
  const auto add = forced_call_grammar(ToolCallFormat::GptOss, false, kTools, "add", false);
  EXPECT_FALSE(model::grammar_matches(add, call));
  EXPECT_TRUE(model::grammar_matches(add, "<|channel|>commentary to=functions.add<|message|>{\"a\":1,\"b\":-2}"));
}

TEST(ForcedCallGrammar, DeepSeekDerivesV3AndV31CallsAndClosedReasoning) {
  const std::string v3 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": "
      "\"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const std::string v31 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1, \"b\": 2}<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const auto parallel = forced_call_grammar(ToolCallFormat::DeepSeek, false, kTools, "", true);
  const auto one = forced_call_grammar(ToolCallFormat::DeepSeek, false, kTools, "", false);
  for (const auto& g : {parallel, one}) {
    EXPECT_TRUE(model::grammar_matches(g, v3));
    EXPECT_FALSE(model::grammar_matches(g, "Sure. " + v3));  // nothing but the call
    EXPECT_FALSE(model::grammar_matches(g, "<think>x</think>" + v3));
  }
  EXPECT_EQ(calls_in(v3, ToolCallFormat::DeepSeek).size(), 1u);
  EXPECT_TRUE(model::grammar_matches(parallel, v31));
  EXPECT_FALSE(model::grammar_matches(one, v31));  // two calls
  EXPECT_EQ(calls_in(v31, ToolCallFormat::DeepSeek).size(), 2u);
  // After a generation prompt that opened <think>: the reasoning first, closed.
  const auto open = forced_call_grammar(ToolCallFormat::DeepSeek, true, kTools, "get_weather", false);
  const std::string reasoned = "The user asks </thin about <b>Paris</b>.\n</think>\n\n" + v3;
  EXPECT_TRUE(model::grammar_matches(open, reasoned));
  EXPECT_EQ(calls_in(reasoned, ToolCallFormat::DeepSeek, true).size(), 1u);
  EXPECT_FALSE(model::grammar_matches(open, v3));                           // the reasoning left open
  EXPECT_FALSE(model::grammar_matches(open, "a</think>b</think>\n" + v3));  // closed twice
}

TEST(ForcedCallGrammar, NamesTheSyntaxesCannotWriteAre400) {
  json tools = kTools;
  tools[0]["function"]["name"] = "get weather";
  EXPECT_ERROR(forced_call_grammar(ToolCallFormat::GptOss, false, tools, "", true),
               "the function name 'get weather' cannot be written in this model's gpt-oss call syntax");
  tools = kTools;
  tools[1]["function"]["parameters"]["properties"]["a"]["pattern"] = "^[0-9]+$";
  EXPECT_ERROR(forced_call_grammar(ToolCallFormat::DeepSeek, false, tools, "", true), "the parameters of 'add'");
  EXPECT_ERROR(forced_call_grammar(ToolCallFormat::None, false, kTools, "", true), "syntax weft knows (none)");
}

// A copy of a model whose tokens `texts` are user-defined (llama_token_type 4).
std::vector<uint8_t> with_user_defined(const std::vector<uint8_t>& bytes, const std::vector<std::string>& texts) {
  auto f = gguf::File::parse(bytes.data(), bytes.size());
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> types;
  for (int64_t t : f->get_int_array("tokenizer.ggml.token_type")) types.push_back(static_cast<int32_t>(t));
  for (const auto& text : texts) {
    const auto it = std::find(tokens.begin(), tokens.end(), text);
    EXPECT_NE(it, tokens.end()) << text;
    if (it != tokens.end()) types[it - tokens.begin()] = 4;
  }
  gguf::Writer w;
  for (const auto& k : f->key_order())
    if (k != "tokenizer.ggml.token_type") w.set_value(k, f->metadata().at(k));
  w.set_i32_array("tokenizer.ggml.token_type", types);
  for (const auto& t : f->tensors())
    w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  return w.to_bytes();
}

// A server on the generated model with a family's template and, as the family's vocabulary has
// them, its framing tokens as tokens of their own; tool_choice forced, sampled.
class ForcedFamilyCall : public ::testing::Test {
 protected:
  struct Family {
    weft::test_support::GeneratedModel model;
    std::unique_ptr<TestServer> server;
  };
  // tokens: the family's, control tokens as its files have them; user_defined: those of them its
  // files have as user-defined (DeepSeek's <think>, </think>).
  static std::unique_ptr<Family> start(const char* template_file, std::vector<std::string> tokens,
                                       const std::vector<std::string>& user_defined = {}) {
    std::ifstream f(std::string(WEFT_SOURCE_DIR) + "/tests/data/chat_templates/" + template_file);
    const std::string tmpl((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    tools::GenModelOptions o;
    o.control_tokens = std::move(tokens);
    auto fam = std::unique_ptr<Family>(new Family{weft::test_support::GeneratedModel(o), nullptr});
    if (!user_defined.empty()) {
      fam->model.bytes = with_user_defined(fam->model.bytes, user_defined);
      fam->model.file = gguf::File::parse(fam->model.bytes.data(), fam->model.bytes.size(), "generated");
      fam->model.tok = tokenizer::Tokenizer::from_gguf(*fam->model.file);
    }
    fam->server = std::make_unique<TestServer>(*fam->model.file, *fam->model.tok,
                                               weft::test_support::cpu_engine_options(1, 1, 4096), ServerOptions{},
                                               runtime::SchedulerOptions{}, tmpl);
    return fam;
  }
  static json request(const json& tool_choice, bool stream) {
    return {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
            {"tools", kTools},
            {"tool_choice", tool_choice},
            {"max_tokens", 3000},
            {"temperature", 0.8},
            {"seed", 3},
            {"stream", stream}};
  }
  // The reply's calls, whole or from the stream's deltas; finish_reason in `finish`.
  static json calls(const Reply& r, bool stream, std::string& finish) {
    if (!stream) {
      finish = r.body["choices"][0]["finish_reason"];
      return r.body["choices"][0]["message"].value("tool_calls", json::array());
    }
    json out = json::array();
    for (const auto& p : sse_payloads(r.text)) {
      if (p == "[DONE]") continue;
      const json chunk = json::parse(p);
      if (chunk["choices"].empty()) continue;
      const json& ch = chunk["choices"][0];
      if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
      if (!ch["delta"].contains("tool_calls")) continue;
      const json& c = ch["delta"]["tool_calls"][0];
      if (c.contains("id")) out.push_back(c);
      out.back()["function"]["arguments"] =
          out.back()["function"]["arguments"].get<std::string>() + c["function"].value("arguments", "");
    }
    return out;
  }
  // A named call of each tool and a required one, whole and streamed: one call of the tool whose
  // arguments follow its schema.
  static void expect_forced_calls(const TestServer& server) {
    auto c = server.client(120);
    for (bool stream : {false, true}) {
      for (const json& choice : {json({{"type", "function"}, {"function", {{"name", "get_weather"}}}}),
                                 json({{"type", "function"}, {"function", {{"name", "add"}}}}), json("required")}) {
        const Reply r = post(c, "/v1/chat/completions", request(choice, stream));
        ASSERT_EQ(r.status, 200) << r.text;
        std::string finish;
        const json cs = calls(r, stream, finish);
        EXPECT_EQ(finish, "tool_calls") << r.text;
        ASSERT_GE(cs.size(), 1u) << r.text;
        const std::string name = cs[0]["function"]["name"];
        if (choice.is_object()) {
          EXPECT_EQ(name, choice["function"]["name"]) << r.text;
        }
        const json args = json::parse(cs[0]["function"]["arguments"].get<std::string>());
        if (name == "add") {
          EXPECT_TRUE(args.size() == 2 && args["a"].is_number_integer() && args["b"].is_number_integer()) << r.text;
        } else {
          EXPECT_TRUE(name == "get_weather" && args.size() == 1 && args["location"].is_string()) << r.text;
        }
      }
    }
  }
};

TEST_F(ForcedFamilyCall, GptOss) {
  auto fam = start("openai-gpt-oss-120b.jinja",
                   {"<|start|>", "<|message|>", "<|end|>", "<|return|>", "<|channel|>", "<|call|>", "<|constrain|>"});
  expect_forced_calls(*fam->server);
}

TEST_F(ForcedFamilyCall, DeepSeekV31) {
  auto fam = start(
      "deepseek-ai-DeepSeek-V3.1.jinja",
      {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>",
       "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<think>", "</think>"},
      {"<think>", "</think>"});
  expect_forced_calls(*fam->server);
}

}  // namespace
}  // namespace weft::serve::test_support
