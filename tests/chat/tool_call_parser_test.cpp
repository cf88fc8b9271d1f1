#include "chat/tool_call_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace weft::chat {
namespace {

ParseOptions opts(ToolCallFormat f, bool think = false) {
  return {.format = {.tools = f, .think_tags = think}, .parse_tools = true, .thinking_open = false, .partial = false};
}

ParsedOutput whole(std::string_view text, ParseOptions o) {
  o.partial = false;
  return parse_output(text, o);
}

// Every cut of `text` parses (partially) to a prefix of the whole parse: content and reasoning
// prefixes, the calls so far the first calls of the whole, unchanged. This is what lets a stream
// send the difference between consecutive parses and never take anything back.
void expect_prefixes_at_every_cut(std::string_view text, ParseOptions o) {
  const ParsedOutput all = whole(text, o);
  o.partial = true;
  for (size_t n = 0; n <= text.size(); ++n) {
    const ParsedOutput p = parse_output(text.substr(0, n), o);
    SCOPED_TRACE("cut at " + std::to_string(n) + ": " + std::string(text.substr(0, n)));
    EXPECT_TRUE(all.content.starts_with(p.content)) << "partial content '" << p.content << "'";
    EXPECT_TRUE(all.reasoning.starts_with(p.reasoning)) << "partial reasoning '" << p.reasoning << "'";
    ASSERT_LE(p.tool_calls.size(), all.tool_calls.size());
    for (size_t i = 0; i < p.tool_calls.size(); ++i) EXPECT_EQ(p.tool_calls[i], all.tool_calls[i]);
  }
}

ToolCall call(std::string name, std::string args, std::string id = "") {
  return {.id = std::move(id), .name = std::move(name), .arguments = std::move(args)};
}

// The whole parse of `text` is exactly this, and every cut of it a prefix.
void expect_parse(std::string_view text, const ParseOptions& o, std::string_view reasoning, std::string_view content,
                  const std::vector<ToolCall>& calls) {
  const ParsedOutput p = whole(text, o);
  EXPECT_EQ(p.reasoning, reasoning);
  EXPECT_EQ(p.content, content);
  EXPECT_EQ(p.tool_calls, calls);
  expect_prefixes_at_every_cut(text, o);
}

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(WEFT_SOURCE_DIR) + "/tests/data/chat_templates/" + name + ".jinja");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(OutputFormat, DetectedFromTheTemplatesOfTheFamiliesWeftRuns) {
  struct Case {
    const char* file;
    ToolCallFormat tools;
    bool think;
  };
  const Case cases[] = {
      {"Qwen-Qwen3-0.6B", ToolCallFormat::Hermes, true},
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::Hermes, false},
      {"Qwen-QwQ-32B", ToolCallFormat::Hermes, true},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::Hermes, false},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::Llama3, false},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallFormat::Llama3, false},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::Mistral, false},
      {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::Mistral, false},
      {"openai-gpt-oss-120b", ToolCallFormat::GptOss, false},
      {"deepseek-ai-DeepSeek-V3.1", ToolCallFormat::DeepSeek, true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolCallFormat::DeepSeek, true},
      {"google-gemma-2-2b-it", ToolCallFormat::None, false},
  };
  for (const auto& c : cases) {
    const std::string src = read_template(c.file);
    ASSERT_FALSE(src.empty()) << c.file;
    const OutputFormat f = detect_output_format(src);
    EXPECT_EQ(format_name(f.tools), format_name(c.tools)) << c.file;
    EXPECT_EQ(f.think_tags, c.think) << c.file;
  }
}

TEST(ToolCallParser, HermesCallsAndQwen3Thinking) {
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const auto o = opts(ToolCallFormat::Hermes, true);
  const ParsedOutput p = whole(text, o);
  EXPECT_EQ(p.reasoning, "The user wants weather.");
  EXPECT_EQ(p.content, "Let me check.\n");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0], call("get_weather", R"({"location":"Paris","unit":"c"})"));
  EXPECT_EQ(p.tool_calls[1], call("get_time", "{}"));
  expect_prefixes_at_every_cut(text, o);
}

TEST(ToolCallParser, HermesArgumentsAsAStringAndAMissingCloseAtTheEnd) {
  const auto p = whole("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}", opts(ToolCallFormat::Hermes));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0], call("f", R"({"a":1})"));
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallParser, MalformedCallsStayTextAsLlamaServerKeepsThem) {
  const auto o = opts(ToolCallFormat::Hermes);
  for (std::string text : {
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": }}</tool_call> after",  // invalid JSON
           "<tool_call>{\"arguments\": {}}</tool_call>",                                // no name
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",              // not an object
           "<tool_call>{\"name\": \"f\", \"arguments\": {}} and then text",             // never closed
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}",                    // cut off
       }) {
    const auto p = whole(text, o);
    EXPECT_TRUE(p.tool_calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_prefixes_at_every_cut(text, o);
  }
}

TEST(ToolCallParser, StreamingHoldsBackAPossibleMarker) {
  auto o = opts(ToolCallFormat::Hermes);
  o.partial = true;
  EXPECT_EQ(parse_output("Sure<tool_", o).content, "Sure");
  EXPECT_EQ(parse_output("Sure<tool_call>{\"name\": \"f\"", o).content, "Sure");
  EXPECT_EQ(parse_output("Sure<tool_call>{\"name\": \"f\"", o).tool_calls.size(), 0u);
  EXPECT_EQ(parse_output("a < b", o).content, "a < b");
  o.format.think_tags = true;
  EXPECT_EQ(parse_output("<thi", o).content, "");
  EXPECT_EQ(parse_output("<think>abc</thi", o).reasoning, "abc");
  EXPECT_EQ(parse_output("<think>abc</think>x<", o).content, "x");
}

TEST(ToolCallParser, NoToolsOfferedMeansContent) {
  auto o = opts(ToolCallFormat::Hermes, true);
  o.parse_tools = false;
  const auto p = whole("<think>hm</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", o);
  EXPECT_EQ(p.reasoning, "hm");
  EXPECT_EQ(p.content, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ToolCallParser, Llama3JsonAloneAndAfterPythonTag) {
  const auto o = opts(ToolCallFormat::Llama3);
  const std::string plain = "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}";
  auto p = whole(plain, o);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0], call("get_weather", R"({"location":"Paris"})"));
  EXPECT_EQ(p.content, "");
  expect_prefixes_at_every_cut(plain, o);

  const std::string tagged = "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"x\": [1, 2]}}";
  p = whole(tagged, o);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0], call("f", R"({"x":[1,2]})"));
  expect_prefixes_at_every_cut(tagged, o);

  // JSON that is not a call, and a call's JSON in the middle of prose, are content.
  for (std::string text : {"{\"a\": 1} is JSON", "Call {\"name\": \"f\", \"parameters\": {}} later"}) {
    p = whole(text, o);
    EXPECT_TRUE(p.tool_calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_prefixes_at_every_cut(text, o);
  }
}

TEST(ToolCallParser, MistralArrayAndArgsForms) {
  const auto o = opts(ToolCallFormat::Mistral);
  const std::string nemo =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, \"id\": \"abc123def\"}, "
      "{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"xyz987uvw\"}]";
  auto p = whole(nemo, o);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0], call("get_weather", R"({"location":"Paris"})", "abc123def"));
  EXPECT_EQ(p.tool_calls[1], call("get_time", "{}", "xyz987uvw"));
  expect_prefixes_at_every_cut(nemo, o);

  const std::string small = "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"location\": \"Paris\"}";
  p = whole(small, o);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0], call("get_weather", R"({"location":"Paris"})", "a1b2c3d4e"));
  expect_prefixes_at_every_cut(small, o);

  const std::string devstral = "Checking.[TOOL_CALLS]f[ARGS]{\"a\": 1}[TOOL_CALLS]g[ARGS]{}";
  p = whole(devstral, o);
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[1], call("g", "{}"));
  expect_prefixes_at_every_cut(devstral, o);

  p = whole("[TOOL_CALLS]f[ARGS]{bad}", o);
  EXPECT_TRUE(p.tool_calls.empty());
  EXPECT_EQ(p.content, "[TOOL_CALLS]f[ARGS]{bad}");
}

TEST(ToolCallParser, GptOssHarmonyChannels) {
  const auto o = opts(ToolCallFormat::GptOss);
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>";
  expect_parse(text, o, "Need the weather.", "", {call("get_weather", R"({"location":"Paris"})")});

  const std::string answer =
      "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>It is 22 C.";
  expect_parse(answer, o, "Easy.", "It is 22 C.", {});

  // The recipient in the header before the channel, as harmony also allows.
  auto p = whole("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>", o);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0], call("f", "{}"));
  p = whole("plain text", o);
  EXPECT_EQ(p.content, "plain text");
  // A string in the arguments holding a framing token's text is the call's (read as JSON first).
  const std::string framed =
      "<|channel|>commentary to=functions.say<|message|>{\"text\": \"a<|end|><|start|>b\"}<|end|>"
      "<|start|>assistant<|channel|>final<|message|>Done.";
  expect_parse(framed, o, "", "Done.", {call("say", R"({"text":"a<|end|><|start|>b"})")});
}

TEST(ToolCallParser, DeepSeekR1AndV31Calls) {
  auto o = opts(ToolCallFormat::DeepSeek, true);
  o.thinking_open = true;  // R1's generation prompt ends with <think>
  const std::string r1 =
      "Thinking it over.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
      "```json\n{\"location\": "
      "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
      "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_parse(r1, o, "Thinking it over.", "",
               {call("get_weather", R"({"location":"Paris"})"), call("get_time", "{}")});

  o.thinking_open = false;
  const std::string v31 =
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Paris\"}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_parse(v31, o, "", "Sure.", {call("get_weather", R"({"location":"Paris"})")});

  const std::string bad = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{oops}<｜tool▁call▁end｜>";
  expect_parse(bad, o, "", bad, {});
}

}  // namespace
}  // namespace weft::chat
