// Chat templates as llama.cpp applies them without a Jinja engine (src/llama-chat.cpp): a model's
// tokenizer.chat_template is recognised by the same substring heuristics
// (llm_chat_detect_template), or a template is named (--chat-template chatml), and a
// conversation renders to exactly the string llm_chat_apply_template renders. A template weft
// does not recognise is an error naming --chat-template, never a silent guess.
#pragma once

#include "gguf/gguf_reader.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::chat {

struct Message {
  std::string role;  // "system" | "user" | "assistant" (some templates know more, e.g. "tool")
  std::string content;
};

// llama.cpp's built-in templates (llm_chat_template), in the order of its name table.
enum class Family {
  ChatML,
  Llama2,
  Llama2Sys,
  Llama2SysBos,
  Llama2SysStrip,
  MistralV1,
  MistralV3,
  MistralV3Tekken,
  MistralV7,
  MistralV7Tekken,
  Phi3,
  Phi4,
  Falcon3,
  Zephyr,
  Monarch,
  Gemma,
  Orion,
  OpenChat,
  Vicuna,
  VicunaOrca,
  Deepseek,
  Deepseek2,
  Deepseek3,
  CommandR,
  Llama3,
  ChatGlm3,
  ChatGlm4,
  GlmEdge,
  MiniCpm,
  Exaone3,
  Exaone4,
  RwkvWorld,
  Granite,
  GigaChat,
  Megrez,
  Yandex,
  Bailing,
  BailingThink,
  Bailing2,
  Llama4,
  SmolVlm,
  HunyuanMoe,
  GptOss,
  HunyuanDense,
  KimiK2,
  SeedOss,
  Grok2,
  PanguEmbed,
  Dots1,  // detected from a template, but llama.cpp gives it no name to choose it by
  Count,
};

// The family a --chat-template NAME selects; nullopt for anything else.
std::optional<Family> family_from_name(std::string_view name);
// llm_chat_detect_template: a name first, then the substring heuristics; nullopt when unknown.
std::optional<Family> detect_family(std::string_view name_or_source);
std::string_view family_name(Family f);  // "chatml", ...; "dots1" for the unnamed one
// The names --chat-template accepts, comma-separated (for help and error messages).
std::string template_names();

class Template {
 public:
  explicit Template(Family f, bool fell_back = false) : family_(f), fell_back_(fell_back) {}
  // A name (chatml, llama3, ...) or a template's source text, as --chat-template takes it.
  // Throws weft::Error("chat") naming --chat-template when neither is recognised.
  static Template from_string(std::string_view name_or_source);
  // The model's tokenizer.chat_template; a file without one gets chatml, as in llama.cpp, and
  // fell_back() says so (callers print one line). An unrecognised one throws, naming
  // --chat-template.
  static Template from_gguf(const gguf::File& file);
  // override_name_or_source non-empty: from_string(it); otherwise from_gguf(file).
  static Template resolve(const gguf::File& file, std::string_view override_name_or_source);

  Family family() const { return family_; }
  std::string_view name() const { return family_name(family_); }
  bool fell_back() const { return fell_back_; }

  // llm_chat_apply_template: the prompt text of `messages` (no BOS: tokenizing adds it), ending
  // with the assistant's opening when add_generation_prompt.
  std::string render(std::span<const Message> messages, bool add_generation_prompt) const;
  // The special-token texts the rendering writes (<|im_start|>, <|im_end|>, ...), which a
  // vocabulary must hold as control tokens for them to be parsed as such.
  std::vector<std::string_view> markers() const;

 private:
  Family family_;
  bool fell_back_;
};

// llama.cpp's common_chat_format_single: the text that appending `message` adds to the
// rendering of `past` (rendered without a generation prompt). A past ending in '\n' keeps that
// newline in front of the difference, because a chat loop's cache holds the reply's
// end-of-turn token but not the newline the template writes after it.
std::string render_suffix(const Template& tmpl, std::span<const Message> past, const Message& message,
                          bool add_generation_prompt);

}  // namespace weft::chat
