// Chat templates against llama.cpp: detection from each model's template and the rendered
// conversation, byte for byte; names, fallbacks and errors.
#include "chat/chat_template.h"

#include "chat/llama_cpp_cases.h"
#include "gguf/gguf_writer.h"
#include "support/expect_error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace weft::chat {
namespace {

// llama.cpp's test conversation (tests/test-chat-template.cpp).
const std::vector<Message> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

TEST(ChatTemplate, EveryLlamaCppCaseIsDetectedAndRenderedExactly) {
  for (const test_cases::LlamaCppCase& c : test_cases::kLlamaCpp) {
    const std::optional<Family> f = detect_family(c.source);
    ASSERT_TRUE(f.has_value()) << c.model;
    EXPECT_EQ(family_name(*f), family_name(c.family)) << c.model;
    std::vector<Message> chat = kConversation;
    if (c.tool_call) {
      chat.push_back({"user", "What is the weather?"});
      chat.push_back({"assistant_tool_call", R"([{"name": "get_weather", "arguments": {"location": "NYC"}}])"});
      chat.push_back({"tool_response", R"({"temperature": 72})"});
    }
    EXPECT_EQ(Template(*f).render(chat, true), c.expected) << c.model;
  }
}

// The same templates' text runs on the Jinja engine, which renders them or, where the template
// refuses the conversation (raise_exception: a system message Gemma 1 does not take, roles that
// do not alternate), falls back to the built-in renderer the text is recognised as.
TEST(ChatTemplate, EveryLlamaCppCaseRunsOnTheJinjaEngine) {
  for (const test_cases::LlamaCppCase& c : test_cases::kLlamaCpp) {
    const Template t = Template::from_string(c.source);
    EXPECT_TRUE(t.is_jinja()) << c.model;
    EXPECT_EQ(t.family(), c.family) << c.model;
    EXPECT_NO_THROW(t.render(kConversation, true)) << c.model;
  }
  // One worked through: ChatML's template renders what the built-in renderer does.
  const Template chatml = Template::from_string(test_cases::kLlamaCpp[0].source);
  EXPECT_EQ(chatml.render(kConversation, true), Template(Family::ChatML).render(kConversation, true));
  EXPECT_EQ(chatml.render(kConversation, false), Template(Family::ChatML).render(kConversation, false));
}

// Families llama.cpp's test has no model for. The sources are minimal texts holding the
// substrings llama.cpp's detection looks for; the expected strings are what its renderer
// (src/llama-chat.cpp) writes for them, worked out from that code.
struct OwnCase {
  Family family;
  const char* source;  // nullptr: reachable by name only
  const char* expected;
};
const OwnCase kOwn[] = {
    {Family::Llama2Sys, "{{ '[INST] <<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' }}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I "
     "am an assistant   </s>[INST] Another question [/INST]"},
    {Family::MistralV7Tekken, nullptr,
     "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are "
     "you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {Family::Falcon3, "{{ '<|user|>\\n' }}{{ '<|assistant|>\\n' }}{{ '</s>' }}",
     "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi there\n<|user|>\nWho are "
     "you\n<|assistant|>\n   I am an assistant   \n<|user|>\nAnother question\n<|assistant|>\n"},
    {Family::Zephyr, "{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}",
     "<|system|>\nYou are a helpful assistant<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\nHi "
     "there<|endoftext|>\n<|user|>\nWho are you<|endoftext|>\n<|assistant|>\n   I am an assistant   "
     "<|endoftext|>\n<|user|>\nAnother question<|endoftext|>\n<|assistant|>\n"},
    {Family::Deepseek3, "{{'<｜User｜>' + content}}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}",
     "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who are "
     "you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another question<｜Assistant｜>"},
    {Family::Exaone3, "{{ '[|system|]' }}{{ '[|assistant|]' }}{{ '[|endofturn|]' }}",
     "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]"
     "Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"},
    {Family::Exaone4, "{{ '[|system|]' }}{{ '[|assistant|]' }}{{ '[|endofturn|]' }}{{ '[|tool|]' }}",
     "[|system|]You are a helpful assistant[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there[|endofturn|]\n[|user|]"
     "Who are you\n[|assistant|]I am an assistant[|endofturn|]\n[|user|]Another question\n[|assistant|]"},
    {Family::RwkvWorld, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}",
     "System: You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there\n\nUser: Who are you\n\nAssistant: I "
     "am an assistant\n\nUser: Another question\n\nAssistant:"},
    {Family::BailingThink, "{{ '<role>ASSISTANT</role>' }}{% if role == \"HUMAN\" %}<think>{% endif %}",
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi "
     "there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>Another "
     "question<role>ASSISTANT</role><think>"},
    {Family::Bailing2, "{{ '<role>HUMAN</role>' + content + '<|role_end|>' }}{{ '<role>ASSISTANT</role>' }}",
     "<role>SYSTEM</role>You are a helpful assistant<|role_end|><role>HUMAN</role>Hello<|role_end|><role>ASSISTANT</"
     "role>Hi there<|role_end|><role>HUMAN</role>Who are you<|role_end|><role>ASSISTANT</role>   I am an assistant   "
     "<|role_end|><role>HUMAN</role>Another question<|role_end|><role>ASSISTANT</role>"},
    {Family::Llama4, "{{ '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}",
     "<|header_start|>system<|header_end|>\n\nYou are a helpful assistant<|eot|><|header_start|>user<|header_end|>\n\n"
     "Hello<|eot|><|header_start|>assistant<|header_end|>\n\nHi there<|eot|><|header_start|>user<|header_end|>\n\nWho "
     "are you<|eot|><|header_start|>assistant<|header_end|>\n\nI am an "
     "assistant<|eot|><|header_start|>user<|header_end|>\n\nAnother "
     "question<|eot|><|header_start|>assistant<|header_end|>\n\n"},
    {Family::SmolVlm, "<|im_start|>{{ 'User: ' + content + '<end_of_utterance>\\n' }}",
     "<|im_start|>You are a helpful assistant\n\nUser: Hello<end_of_utterance>\nAssistant: Hi "
     "there<end_of_utterance>\nUser: Who are you<end_of_utterance>\nAssistant:    I am an assistant   "
     "<end_of_utterance>\nUser: Another question<end_of_utterance>\nAssistant:"},
    {Family::HunyuanMoe, "{{ content + '<|extra_0|>' }}{{ content + '<|extra_4|>' }}",
     "<|startoftext|>You are a helpful assistant<|extra_4|><|startoftext|>Hello<|extra_0|>Hi "
     "there<|eos|><|startoftext|>Who are you<|extra_0|>   I am an assistant   <|eos|><|startoftext|>Another "
     "question<|extra_0|>"},
    {Family::GptOss, "{{ '<|start|>' + role + '<|channel|>' }}",
     "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|><|start|>"
     "assistant<|message|>Hi there<|return|><|start|>user<|message|>Who are "
     "you<|end|><|start|>assistant<|message|>   I am an assistant   <|return|><|start|>user<|message|>Another "
     "question<|end|><|start|>assistant"},
    {Family::HunyuanDense, "{{ '<｜hy_Assistant｜>' }}{{ '<｜hy_place▁holder▁no▁3｜>' }}",
     "You are a helpful assistant<｜hy_place▁holder▁no▁3｜><｜hy_User｜>Hello<｜hy_Assistant｜><｜hy_Assistant｜>Hi "
     "there<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Who are you<｜hy_Assistant｜><｜hy_Assistant｜>   I am an assistant  "
     " "
     "<｜hy_place▁holder▁no▁2｜><｜hy_User｜>Another question<｜hy_Assistant｜>"},
    {Family::KimiK2, "{{ '<|im_assistant|>assistant<|im_middle|>' }}",
     "<|im_system|>system<|im_middle|>You are a helpful "
     "assistant<|im_end|><|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>Hi "
     "there<|im_end|><|im_user|>user<|im_middle|>Who are you<|im_end|><|im_assistant|>assistant<|im_middle|>   I am "
     "an assistant   <|im_end|><|im_user|>user<|im_middle|>Another "
     "question<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {Family::Grok2, "{{ 'Assistant: '  + message['content'] + '<|separator|>\\n\\n' }}",
     "System: You are a helpful assistant<|separator|>\n\nHuman: Hello<|separator|>\n\nAssistant: Hi "
     "there<|separator|>\n\nHuman: Who are you<|separator|>\n\nAssistant:    I am an assistant   "
     "<|separator|>\n\nHuman: Another question<|separator|>\n\nAssistant:"},
    {Family::PanguEmbed, "{{ '[unused9]系统：[unused10]' }}",
     "[unused9]系统：You are a helpful assistant[unused10][unused9]用户：Hello[unused10][unused9]助手：Hi "
     "there[unused10][unused9]用户：Who are you[unused10][unused9]助手：   I am an assistant   "
     "[unused10][unused9]用户：Another question[unused10][unused9]助手："},
    {Family::Dots1, "{{ '<|userprompt|>' + content + '<|endofuserprompt|>' }}",
     "<|system|>You are a helpful assistant<|endofsystem|><|userprompt|>Hello<|endofuserprompt|><|response|>Hi "
     "there<|endofresponse|><|userprompt|>Who are you<|endofuserprompt|><|response|>   I am an assistant   "
     "<|endofresponse|><|userprompt|>Another question<|endofuserprompt|><|response|>"},
};

TEST(ChatTemplate, FamiliesWithoutALlamaCppCaseFollowItsRenderer) {
  for (const OwnCase& c : kOwn) {
    const std::string name(family_name(c.family));
    if (c.source) {
      const std::optional<Family> f = detect_family(c.source);
      ASSERT_TRUE(f.has_value()) << name;
      EXPECT_EQ(family_name(*f), name);
    }
    EXPECT_EQ(Template(c.family).render(kConversation, true), c.expected) << name;
  }
}

TEST(ChatTemplate, EveryFamilyIsCoveredAndEveryNameSelectsItsFamily) {
  std::set<Family> covered;
  for (const auto& c : test_cases::kLlamaCpp) covered.insert(c.family);
  for (const OwnCase& c : kOwn) covered.insert(c.family);
  for (int i = 0; i < static_cast<int>(Family::Count); ++i) {
    const Family f = static_cast<Family>(i);
    EXPECT_TRUE(covered.count(f)) << family_name(f) << " has no rendering test";
    const std::string name(family_name(f));
    if (f == Family::Dots1) {
      EXPECT_FALSE(family_from_name(name).has_value()) << "llama.cpp gives dots1 no name";
      continue;
    }
    ASSERT_TRUE(family_from_name(name).has_value()) << name;
    EXPECT_EQ(*family_from_name(name), f);
    EXPECT_EQ(Template::from_string(name).family(), f);
    EXPECT_NE(template_names().find(name), std::string::npos) << name;
  }
  // "mistral" is no name, but llama.cpp's detection reads a template starting with it as llama2.
  EXPECT_EQ(Template::from_string("mistral").family(), Family::Llama2);
}

// llama.cpp's common_chat_format_single tests: the system message alone, then the text a new
// user message adds to a conversation (test-chat-template.cpp, "llama_chat_format_single").
TEST(ChatTemplate, SuffixOfANewMessageMatchesLlamaCpp) {
  const Message sys{"system", "You are a helpful assistant"};
  auto fmt_sys = [&](const char* name) { return render_suffix(Template::from_string(name), {}, sys, false); };
  EXPECT_EQ(fmt_sys("chatml"), "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n");
  EXPECT_EQ(fmt_sys("mistral-v1"), " [INST] You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys("mistral-v3"), "[INST] You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys("mistral-v3-tekken"), "[INST]You are a helpful assistant\n\n");
  EXPECT_EQ(fmt_sys("mistral-v7"), "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT]");
  EXPECT_EQ(fmt_sys("llama2"), "[INST] You are a helpful assistant\n");
  EXPECT_EQ(fmt_sys("llama2-sys"), "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n");
  EXPECT_EQ(fmt_sys("mistral"), "[INST] You are a helpful assistant\n");
  EXPECT_EQ(fmt_sys("gemma"), "");
  EXPECT_EQ(fmt_sys("llama3"), "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>");
  EXPECT_EQ(fmt_sys("gigachat"), "<s>You are a helpful assistant<|message_sep|>");

  const std::vector<Message> past = {sys, {"user", "Hello"}, {"assistant", "I am assistant"}};
  const Message next{"user", "How are you"};
  auto fmt_single = [&](const char* name) { return render_suffix(Template::from_string(name), past, next, true); };
  EXPECT_EQ(fmt_single("chatml"), "\n<|im_start|>user\nHow are you<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(fmt_single("mistral-v1"), " [INST] How are you [/INST]");
  EXPECT_EQ(fmt_single("mistral-v3"), "[INST] How are you[/INST]");
  EXPECT_EQ(fmt_single("mistral-v3-tekken"), "[INST]How are you[/INST]");
  EXPECT_EQ(fmt_single("mistral-v7"), "[INST] How are you[/INST]");
  EXPECT_EQ(fmt_single("llama2"), "[INST] How are you [/INST]");
  EXPECT_EQ(fmt_single("mistral"), "[INST] How are you [/INST]");
  EXPECT_EQ(fmt_single("gemma"), "\n<start_of_turn>user\nHow are you<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(fmt_single("llama3"),
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you<|eot_id|><|start_header_id|>assistant<|end_"
            "header_id|>\n\n");
}

TEST(ChatTemplate, WithoutGenerationPromptTheAssistantOpeningIsLeftOut) {
  const std::vector<Message> one = {{"user", "Hi"}};
  EXPECT_EQ(Template(Family::ChatML).render(one, false), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(Template(Family::ChatML).render(one, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Template(Family::Llama3).render({}, true), "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Monarch writes BOS between messages only: with one message there is none.
  EXPECT_EQ(Template(Family::Monarch).render(one, true), "user\nHi</s>\n<s>assistant\n");
}

TEST(ChatTemplate, UnknownNamesAndTemplatesAreErrorsNamingTheFlag) {
  EXPECT_ERROR(Template::from_string("chatml2"), "--chat-template 'chatml2'");
  EXPECT_ERROR(Template::from_string("chatml2"), "names: bailing, bailing-think");
  EXPECT_ERROR(Template::from_string(""), "--chat-template");
  // Template text no built-in renderer recognises runs on the Jinja engine, with no fallback...
  const Template own = Template::from_string("{% for m in messages %}[{{ m.content }}]{% endfor %}");
  EXPECT_TRUE(own.is_jinja());
  EXPECT_FALSE(own.family().has_value());
  EXPECT_EQ(own.name(), "jinja");
  EXPECT_EQ(own.render(kConversation, true),
            "[You are a helpful assistant][Hello][Hi there][Who are you][   I am an "
            "assistant   ][Another question]");
  EXPECT_TRUE(own.markers().empty());
  // ... so its render errors are the caller's; text that does not parse is refused up front.
  EXPECT_ERROR(Template::from_string("{{ raise_exception('no') }}").render(kConversation, true),
               "the template raised an exception: no");
  EXPECT_ERROR(Template::from_string("{% for m in messages %}"), "its Jinja does not parse");
  EXPECT_ERROR(Template::from_string("{% for m in messages %}"), "--chat-template NAME");
  EXPECT_FALSE(detect_family("INVALID TEMPLATE").has_value());  // llama.cpp's own negative case
  EXPECT_ERROR(Template::from_string("dots1"), "--chat-template");
}

// Reads what llama-server's chat_template_kwargs set, beside weft's enable_thinking default.
constexpr const char* kKwargsTemplate =
    "{% for m in messages %}[{{ m.content }}]{% endfor %}"
    "{% if enable_thinking %}<think>{% else %}<no-think>{% endif %}{{ reasoning_effort | default('-') }}";

TEST(ChatTemplate, KwargsOverrideTheDefaultsKeyByKey) {
  const std::vector<Message> one = {{"user", "Hi"}};
  Template t = Template::from_string(kKwargsTemplate);
  EXPECT_EQ(t.render(one, true), "[Hi]<think>-");
  using J = nlohmann::ordered_json;
  EXPECT_EQ(t.render(one, true, J{{"enable_thinking", false}}), "[Hi]<no-think>-");
  const J openai = J::array({{{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(t.render_openai(openai, nullptr, true, J{{"enable_thinking", false}, {"reasoning_effort", "low"}}),
            "[Hi]<no-think>low");
  // The command line's defaults (--chat-template-kwargs); a render's kwargs win per key.
  t.set_kwargs(parse_template_kwargs(R"({"enable_thinking": false, "reasoning_effort": "high"})"));
  EXPECT_EQ(t.render(one, true), "[Hi]<no-think>high");
  EXPECT_EQ(t.render(one, true, J{{"enable_thinking", true}}), "[Hi]<think>high");
}

TEST(ChatTemplate, BadKwargsAreErrorsSayingWhy) {
  EXPECT_ERROR(parse_template_kwargs("{enable_thinking: false}"), "not valid JSON");
  EXPECT_ERROR(parse_template_kwargs("[1, 2]"), "must be a JSON object, got array");
  EXPECT_ERROR(parse_template_kwargs("true"), "must be a JSON object, got boolean");
  nlohmann::ordered_json many = nlohmann::ordered_json::object();
  for (size_t i = 0; i <= kMaxTemplateKwargs; ++i) many[fmt::format("k{}", i)] = i;
  EXPECT_ERROR(check_template_kwargs(many), "at most 64");
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 300; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_ERROR(check_template_kwargs({{"x", deep}}), "kwarg 'x': JSON nests deeper");
  EXPECT_ERROR(Template(Family::ChatML).set_kwargs(nlohmann::ordered_json::array()), "must be a JSON object");
  EXPECT_TRUE(parse_template_kwargs("null").is_null());  // none
}

std::unique_ptr<gguf::File> file_with_template(const char* source) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  if (source) w.set_string("tokenizer.chat_template", source);
  static std::vector<std::vector<uint8_t>> keep;  // File::parse reads the bytes in place
  keep.push_back(w.to_bytes());
  return gguf::File::parse(keep.back().data(), keep.back().size());
}

TEST(ChatTemplate, FromGgufDetectsFallsBackVisiblyAndRefusesWhatItCannotRender) {
  const auto llama3 = std::find_if(std::begin(test_cases::kLlamaCpp), std::end(test_cases::kLlamaCpp),
                                   [](const auto& c) { return std::string_view(c.model) == "Llama-3"; });
  const Template t = Template::from_gguf(*file_with_template(llama3->source));
  EXPECT_TRUE(t.is_jinja());
  EXPECT_EQ(t.family(), Family::Llama3);  // its fallback
  EXPECT_FALSE(t.fell_back());
  for (const char* none : {static_cast<const char*>(nullptr), ""}) {
    const Template fb = Template::from_gguf(*file_with_template(none));
    EXPECT_EQ(fb.family(), Family::ChatML);
    EXPECT_TRUE(fb.fell_back());
  }
  // A template no built-in renderer knows runs on the Jinja engine; one that does not parse either is
  // refused, naming the flag that chooses another.
  EXPECT_EQ(Template::from_gguf(*file_with_template("{{ messages[0].role }}")).render(kConversation, true), "system");
  EXPECT_ERROR(Template::from_gguf(*file_with_template("{{ messages ")),
               "the chat template (\"{{ messages \") is not one weft can run");
  EXPECT_ERROR(Template::from_gguf(*file_with_template("{{ messages ")), "--chat-template NAME");
  // A template that does not parse but is recognised renders with the built-in renderer.
  const Template broken = Template::from_gguf(*file_with_template("{{ '<|im_start|>' + "));
  EXPECT_FALSE(broken.is_jinja());
  EXPECT_EQ(broken.family(), Family::ChatML);
  // A name on the command line wins over the file's template, and is checked the same way.
  EXPECT_EQ(Template::resolve(*file_with_template("{{ messages }}"), "gemma").family(), Family::Gemma);
  EXPECT_ERROR(Template::resolve(*file_with_template(nullptr), "nope"), "--chat-template 'nope'");
}

TEST(ChatTemplate, MarkersAreWhatTheRenderingWrites) {
  // Every marker of a family shows up in its rendering of the test conversation (so a
  // vocabulary built from them covers the template), checked where the rendering uses them all.
  for (Family f : {Family::ChatML, Family::Llama3, Family::Gemma, Family::Phi4, Family::CommandR, Family::MistralV7}) {
    const std::string text = Template(f).render(kConversation, true);
    for (std::string_view m : Template(f).markers())
      EXPECT_NE(text.find(m), std::string::npos) << family_name(f) << ": " << m;
  }
  EXPECT_EQ(Template(Family::ChatML).markers(), (std::vector<std::string_view>{"<|im_start|>", "<|im_end|>"}));
}

}  // namespace
}  // namespace weft::chat
