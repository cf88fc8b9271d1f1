// Chat templates. A model's tokenizer.chat_template (or a --chat-template holding template text)
// runs on weft's Jinja engine (jinja_template.h), as llama.cpp's --jinja renders it. The legacy
// renderers stay beside it, as llama.cpp applies templates without a Jinja engine
// (src/llama-chat.cpp): a template is recognised by the same substring heuristics
// (llm_chat_detect_template), or named (--chat-template chatml), and a conversation renders to
// exactly the string llm_chat_apply_template renders. They render a named template, and take over
// (said once on stderr) when the engine cannot parse or render a model's template. A template
// neither can run is an error naming --chat-template, never a silent guess.
#pragma once

#include "chat/tool_call_format.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
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

class JinjaTemplate;
struct ChatContext;

// What a Jinja template is given as bos_token and eos_token (the vocabulary's texts of those
// tokens, as llama.cpp's common_chat_templates_init passes them), and whether tokenizing adds BOS
// itself: then a BOS the template writes first is dropped, as llama.cpp drops it.
struct SpecialTokens {
  std::string bos, eos;
  bool adds_bos = false;
  static SpecialTokens of(const tokenizer::Tokenizer& tok);
};

// llama.cpp's chat_template_kwargs: a JSON object whose keys become variables of a Jinja render
// (enable_thinking, reasoning_effort, ...), over the defaults weft passes.
inline constexpr size_t kMaxTemplateKwargs = 64;
// Throws weft::Error("chat") saying what is wrong: not an object (null: none, accepted), more
// than kMaxTemplateKwargs keys, or a value with no template value (too deep).
void check_template_kwargs(const nlohmann::ordered_json& kwargs);
// --chat-template-kwargs' text, parsed and checked as above.
nlohmann::ordered_json parse_template_kwargs(std::string_view json_text);

class Template {
 public:
  explicit Template(Family f, bool fell_back = false) : family_(f), fell_back_(fell_back) {}
  // A name (chatml, llama3, ...) selects a built-in renderer; a template's source text (it has
  // {{ or {%) runs on the Jinja engine, or on the built-in renderer its text is recognised as
  // when it does not parse. Throws weft::Error("chat") naming --chat-template when neither works.
  static Template from_string(std::string_view name_or_source, const SpecialTokens& tokens = {});
  // The model's tokenizer.chat_template, as from_string takes it; a file without one gets
  // chatml, as in llama.cpp, and fell_back() says so (callers print one line).
  static Template from_gguf(const gguf::File& file, const SpecialTokens& tokens = {});
  // override_name_or_source non-empty: from_string(it); otherwise from_gguf(file).
  static Template resolve(const gguf::File& file, std::string_view override_name_or_source,
                          const SpecialTokens& tokens = {});

  // The built-in family: the one named, or the one a Jinja template's text is recognised as
  // (its fallback); nullopt for a Jinja template no built-in renderer recognises.
  std::optional<Family> family() const { return family_; }
  bool is_jinja() const { return jinja_ != nullptr; }
  // "jinja" for a template the engine runs, else the family's name.
  std::string_view name() const;
  bool fell_back() const { return fell_back_; }
  // Variables every Jinja render is given (--chat-template-kwargs; checked as
  // check_template_kwargs does); a render's own kwargs override them key by key.
  void set_kwargs(nlohmann::ordered_json kwargs);

  // The prompt text of `messages`, ending with the assistant's opening when
  // add_generation_prompt: the Jinja render (a leading BOS dropped when tokenizing adds one), or
  // llm_chat_apply_template's (no BOS). A Jinja render that fails falls back to the family's
  // renderer, said once on stderr; without a family the error is thrown.
  // `kwargs`: a request's chat_template_kwargs (null: none).
  std::string render(std::span<const Message> messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& kwargs = nullptr) const;
  // A conversation in OpenAI's shape, as llama.cpp's common_chat_templates_apply renders it:
  // messages as dicts (assistant tool_calls, role "tool" results with tool_call_id; see
  // template_messages), `tools` (an array of function tools; null: none) given to the template as
  // `tools`, by the file's tokenizer.chat_template.tool_use variant when it has one and tools are
  // given. Only a Jinja template can: throws weft::Error("chat") for a built-in renderer.
  std::string render_openai(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                            bool add_generation_prompt, const nlohmann::ordered_json& kwargs = nullptr) const;
  // How the model writes tool calls and reasoning (tool_call_format.h): read from the template
  // render_openai uses with or without tools; nothing known for a built-in renderer.
  OutputFormat output_format(bool with_tools) const;
  // The special-token texts the built-in rendering writes (<|im_start|>, <|im_end|>, ...), which a
  // vocabulary must hold as control tokens for them to be parsed as such; empty without a family.
  std::vector<std::string_view> markers() const;

 private:
  Template() = default;
  std::string render_jinja(std::span<const Message> messages, bool add_generation_prompt,
                           const nlohmann::ordered_json& kwargs) const;
  // Renders `c` (messages and tools set) on `t` with this template's special tokens, kwargs_ and
  // then `kwargs` as variables.
  std::string run_jinja(const JinjaTemplate& t, ChatContext& c, const nlohmann::ordered_json& kwargs) const;

  std::optional<Family> family_;
  bool fell_back_ = false;
  std::shared_ptr<const JinjaTemplate> jinja_;
  std::shared_ptr<const JinjaTemplate> tool_use_;  // tokenizer.chat_template.tool_use, when the file has it
  OutputFormat format_, tool_use_format_;
  SpecialTokens tokens_;
  nlohmann::ordered_json kwargs_;  // set_kwargs
  // Set once a Jinja render has failed and fallen back, so that it is said once; shared by copies.
  std::shared_ptr<std::atomic<bool>> fallback_said_;
};

// llama.cpp's common_chat_format_single: the text that appending `message` adds to the
// rendering of `past` (rendered without a generation prompt). A past ending in '\n' keeps that
// newline in front of the difference, because a chat loop's cache holds the reply's
// end-of-turn token but not the newline the template writes after it.
// OpenAI's messages as a template reads them, as llama.cpp passes them: a tool call's arguments
// (a JSON string in OpenAI's API) parsed into an object, and the null content of an assistant
// message with tool_calls made "". Throws weft::Error("chat") naming the message whose arguments
// are not a JSON object.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages);

std::string render_suffix(const Template& tmpl, std::span<const Message> past, const Message& message,
                          bool add_generation_prompt);

}  // namespace weft::chat
