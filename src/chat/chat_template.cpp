// Names, detection and markers of the template families; Template's constructors and render().
#include "chat/chat_template.h"

#include "chat/chat_render.h"
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"
#include "core/error.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace weft::chat {
namespace {

struct FamilyInfo {
  Family family;
  std::string_view name;
  bool selectable;                        // in llama.cpp's name table (--chat-template NAME)
  std::vector<std::string_view> markers;  // special-token texts the rendering writes
};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> table = [] {
    const std::vector<std::string_view> phi_roles = {"<|system|>", "<|user|>", "<|assistant|>"};
    std::vector<FamilyInfo> t = {
        {Family::ChatML, "chatml", true, {"<|im_start|>", "<|im_end|>"}},
        {Family::Llama2, "llama2", true, {"</s>"}},
        {Family::Llama2Sys, "llama2-sys", true, {"</s>"}},
        {Family::Llama2SysBos, "llama2-sys-bos", true, {"<s>", "</s>"}},
        {Family::Llama2SysStrip, "llama2-sys-strip", true, {"</s>"}},
        {Family::MistralV1, "mistral-v1", true, {"</s>"}},
        {Family::MistralV3, "mistral-v3", true, {"[INST]", "[/INST]", "</s>"}},
        {Family::MistralV3Tekken, "mistral-v3-tekken", true, {"[INST]", "[/INST]", "</s>"}},
        {Family::MistralV7, "mistral-v7", true, {"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]", "</s>"}},
        {Family::MistralV7Tekken,
         "mistral-v7-tekken",
         true,
         {"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]", "</s>"}},
        {Family::Phi3, "phi3", true, {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"}},
        {Family::Phi4, "phi4", true, {"<|im_start|>", "<|im_sep|>", "<|im_end|>"}},
        {Family::Falcon3, "falcon3", true, phi_roles},
        {Family::Zephyr, "zephyr", true, {"<|system|>", "<|user|>", "<|assistant|>", "<|endoftext|>"}},
        {Family::Monarch, "monarch", true, {"<s>", "</s>"}},
        {Family::Gemma, "gemma", true, {"<start_of_turn>", "<end_of_turn>"}},
        {Family::Orion, "orion", true, {"</s>"}},
        {Family::OpenChat, "openchat", true, {"<|end_of_turn|>"}},
        {Family::Vicuna, "vicuna", true, {"</s>"}},
        {Family::VicunaOrca, "vicuna-orca", true, {"</s>"}},
        {Family::Deepseek, "deepseek", true, {"<|EOT|>"}},
        {Family::Deepseek2, "deepseek2", true, {"<｜end▁of▁sentence｜>"}},
        {Family::Deepseek3, "deepseek3", true, {"<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"}},
        {Family::CommandR,
         "command-r",
         true,
         {"<|START_OF_TURN_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
          "<|END_OF_TURN_TOKEN|>"}},
        {Family::Llama3, "llama3", true, {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
        {Family::ChatGlm3, "chatglm3", true, {"[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>"}},
        {Family::ChatGlm4, "chatglm4", true, {"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>"}},
        {Family::GlmEdge, "glmedge", true, phi_roles},
        {Family::MiniCpm, "minicpm", true, {"<用户>", "<AI>"}},
        {Family::Exaone3, "exaone3", true, {"[|system|]", "[|user|]", "[|assistant|]", "[|endofturn|]"}},
        {Family::Exaone4, "exaone4", true, {"[|system|]", "[|user|]", "[|assistant|]", "[|tool|]", "[|endofturn|]"}},
        {Family::RwkvWorld, "rwkv-world", true, {}},
        {Family::Granite,
         "granite",
         true,
         {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"}},
        {Family::GigaChat, "gigachat", true, {"<s>", "<|message_sep|>", "<|role_sep|>"}},
        {Family::Megrez, "megrez", true, {"<|role_start|>", "<|role_end|>", "<|turn_end|>"}},
        {Family::Yandex, "yandex", true, {"[SEP]"}},
        {Family::Bailing, "bailing", true, {"<role>", "</role>"}},
        {Family::BailingThink, "bailing-think", true, {"<role>", "</role>", "<think>"}},
        {Family::Bailing2, "bailing2", true, {"<role>", "</role>", "<|role_end|>"}},
        {Family::Llama4, "llama4", true, {"<|header_start|>", "<|header_end|>", "<|eot|>"}},
        {Family::SmolVlm, "smolvlm", true, {"<|im_start|>", "<end_of_utterance>"}},
        {Family::HunyuanMoe, "hunyuan-moe", true, {"<|startoftext|>", "<|extra_0|>", "<|extra_4|>", "<|eos|>"}},
        {Family::GptOss, "gpt-oss", true, {"<|start|>", "<|message|>", "<|end|>", "<|return|>"}},
        {Family::HunyuanDense,
         "hunyuan-dense",
         true,
         {"<｜hy_User｜>", "<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>", "<｜hy_place▁holder▁no▁3｜>"}},
        {Family::KimiK2,
         "kimi-k2",
         true,
         {"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"}},
        {Family::SeedOss, "seed_oss", true, {"<seed:bos>", "<seed:eos>"}},
        {Family::Grok2, "grok-2", true, {"<|separator|>"}},
        {Family::PanguEmbed, "pangu-embedded", true, {"[unused9]", "[unused10]"}},
        {Family::Dots1,
         "dots1",
         false,
         {"<|system|>", "<|endofsystem|>", "<|userprompt|>", "<|endofuserprompt|>", "<|response|>",
          "<|endofresponse|>"}},
    };
    return t;
  }();
  return table;
}

const FamilyInfo& info(Family f) {
  const auto& t = families();
  const size_t i = static_cast<size_t>(f);
  WEFT_ASSERT(t.size() == static_cast<size_t>(Family::Count) && i < t.size() && t[i].family == f);
  return t[i];
}

// llm_chat_detect_template's heuristics, in its order: the first rule that matches wins.
std::optional<Family> detect_by_content(std::string_view t) {
  auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return Family::Phi4;
    return has("<end_of_utterance>") ? Family::SmolVlm : Family::ChatML;  // SmolVLM: <|im_start|> as BOS only
  }
  if (t.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return Family::MistralV7;
    // Mistral's official v1 template, or v3 / v3-tekken (they list tools)
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return Family::MistralV1;
      if (has("\"[INST]\"")) return Family::MistralV3Tekken;
      return Family::MistralV3;
    }
    if (has("content.strip()")) return Family::Llama2SysStrip;
    if (has("bos_token + '[INST]")) return Family::Llama2SysBos;
    return has("<<SYS>>") ? Family::Llama2Sys : Family::Llama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return Family::Phi3;
  if (has("[gMASK]<sop>")) return Family::ChatGlm4;
  if (has("<|assistant|>") && has("<|user|>")) return has("</s>") ? Family::Falcon3 : Family::GlmEdge;
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return Family::GlmEdge;
  if (has("<|user|>") && has("<|endoftext|>")) return Family::Zephyr;
  if (has("bos_token + message['role']")) return Family::Monarch;
  if (has("<start_of_turn>")) return Family::Gemma;
  if (has("'\\n\\nAssistant: ' + eos_token")) return Family::Orion;
  if (has("GPT4 Correct ")) return Family::OpenChat;
  if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? Family::VicunaOrca : Family::Vicuna;
  if (has("### Instruction:") && has("<|EOT|>")) return Family::Deepseek;
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return Family::CommandR;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Family::Llama3;
  if (has("[gMASK]sop")) return Family::ChatGlm3;
  if (has("<用户>")) return Family::MiniCpm;
  if (has("'Assistant: ' + message['content'] + eos_token")) return Family::Deepseek2;
  if (has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>")) return Family::Deepseek3;
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"))
    return has("[|tool|]") ? Family::Exaone4 : Family::Exaone3;
  if (has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return Family::RwkvWorld;
  if (has("<|start_of_role|>")) return Family::Granite;
  if (has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
    return Family::GigaChat;
  if (has("<|role_start|>")) return Family::Megrez;
  if (has(" Ассистент:")) return Family::Yandex;
  if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) return Family::Bailing;
  if (has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>")) return Family::BailingThink;
  if (has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>")) return Family::Bailing2;
  if (has("<|header_start|>") && has("<|header_end|>")) return Family::Llama4;
  if (has("<|endofuserprompt|>")) return Family::Dots1;
  if (has("<|extra_0|>") && has("<|extra_4|>")) return Family::HunyuanMoe;
  if (has("<|start|>") && has("<|channel|>")) return Family::GptOss;
  if (has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>")) return Family::HunyuanDense;
  if (has("<|im_assistant|>assistant<|im_middle|>")) return Family::KimiK2;
  if (has("<seed:bos>")) return Family::SeedOss;
  if (has("'Assistant: '  + message['content'] + '<|separator|>")) return Family::Grok2;
  if (has("[unused9]系统：[unused10]")) return Family::PanguEmbed;
  return std::nullopt;
}

// A template source shortened for an error message: first line, at most 48 bytes.
std::string excerpt(std::string_view s) {
  const size_t n = std::min({s.size(), s.find('\n'), size_t{48}});
  return std::string(s.substr(0, n)) + (n < s.size() ? "..." : "");
}

}  // namespace

std::optional<Family> family_from_name(std::string_view name) {
  for (const FamilyInfo& f : families())
    if (f.selectable && f.name == name) return f.family;
  return std::nullopt;
}

std::optional<Family> detect_family(std::string_view name_or_source) {
  if (auto f = family_from_name(name_or_source)) return f;
  return detect_by_content(name_or_source);
}

std::string_view family_name(Family f) { return info(f).name; }

std::string template_names() {
  std::vector<std::string_view> names;
  for (const FamilyInfo& f : families())
    if (f.selectable) names.push_back(f.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

SpecialTokens SpecialTokens::of(const tokenizer::Tokenizer& tok) {
  SpecialTokens t;
  if (tok.bos() >= 0) t.bos = tok.piece(tok.bos(), /*special=*/true);
  if (tok.eos() >= 0) t.eos = tok.piece(tok.eos(), /*special=*/true);
  t.adds_bos = tok.adds_bos();
  return t;
}

namespace {

// Template text rather than a name: it has a Jinja tag.
bool is_template_text(std::string_view s) {
  return s.find("{{") != std::string_view::npos || s.find("{%") != std::string_view::npos;
}

}  // namespace

Template Template::from_string(std::string_view name_or_source, const SpecialTokens& tokens) {
  if (auto f = family_from_name(name_or_source)) return Template(*f);
  // Not template text: llama.cpp's detection may still read it ("mistral..." is llama2).
  if (!is_template_text(name_or_source)) {
    if (auto f = detect_by_content(name_or_source)) return Template(*f);
    fail("chat", "--chat-template '{}' is neither a built-in template name nor a template weft recognises; names: {}",
         excerpt(name_or_source), template_names());
  }
  const std::optional<Family> legacy = detect_by_content(name_or_source);
  try {
    Template t;
    t.jinja_ = std::make_shared<const JinjaTemplate>(name_or_source);
    t.family_ = legacy;
    t.tokens_ = tokens;
    t.format_ = t.tool_use_format_ = detect_output_format(name_or_source);
    t.fallback_said_ = std::make_shared<std::atomic<bool>>(false);
    return t;
  } catch (const Error& e) {
    if (!legacy)
      fail("chat",
           "the chat template (\"{}\") is not one weft can run: its Jinja does not parse ({}) and it is none of "
           "llama.cpp's built-in templates; choose one with --chat-template NAME: {}",
           excerpt(name_or_source), e.message(), template_names());
    std::fprintf(stderr, "weft: the chat template does not parse as Jinja (%s); using the built-in '%s' renderer\n",
                 e.message().c_str(), std::string(family_name(*legacy)).c_str());
    return Template(*legacy);
  }
}

Template Template::from_gguf(const gguf::File& file, const SpecialTokens& tokens) {
  const std::optional<std::string> src = file.get_string_opt("tokenizer.chat_template");
  // llama.cpp renders chatml when the model names no template (common_chat_templates_init).
  if (!src || src->empty()) return Template(Family::ChatML, /*fell_back=*/true);
  Template t = from_string(*src, tokens);
  const std::optional<std::string> tool_use = file.get_string_opt("tokenizer.chat_template.tool_use");
  if (t.jinja_ && tool_use && !tool_use->empty()) {
    try {
      t.tool_use_ = std::make_shared<const JinjaTemplate>(*tool_use);
      t.tool_use_format_ = detect_output_format(*tool_use);
    } catch (const Error& e) {  // the default template still serves requests with tools
      std::fprintf(stderr, "weft: the chat template's tool_use variant does not parse (%s); not used\n",
                   e.message().c_str());
    }
  }
  return t;
}

Template Template::resolve(const gguf::File& file, std::string_view override_name_or_source,
                           const SpecialTokens& tokens) {
  return override_name_or_source.empty() ? from_gguf(file, tokens) : from_string(override_name_or_source, tokens);
}

std::string_view Template::name() const { return jinja_ ? "jinja" : family_name(*family_); }

void check_template_kwargs(const nlohmann::ordered_json& kwargs) {
  if (kwargs.is_null()) return;
  if (!kwargs.is_object()) fail("chat", "chat template kwargs must be a JSON object, got {}", kwargs.type_name());
  if (kwargs.size() > kMaxTemplateKwargs)
    fail("chat", "chat template kwargs hold {} keys, at most {}", kwargs.size(), kMaxTemplateKwargs);
  for (const auto& [k, v] : kwargs.items()) {
    try {
      jinja::from_json(v);
    } catch (const Error& e) {
      fail("chat", "chat template kwarg '{}': {}", k, e.message());
    }
  }
}

nlohmann::ordered_json parse_template_kwargs(std::string_view json_text) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("chat", "chat template kwargs are not valid JSON: {}", json_text);
  check_template_kwargs(j);
  return j;
}

void Template::set_kwargs(nlohmann::ordered_json kwargs) {
  check_template_kwargs(kwargs);
  kwargs_ = std::move(kwargs);
}

std::string Template::render_jinja(std::span<const Message> messages, bool add_generation_prompt,
                                   const nlohmann::ordered_json& kwargs) const {
  ChatContext c;
  c.messages = messages_value(messages);
  c.add_generation_prompt = add_generation_prompt;
  return run_jinja(*jinja_, c, kwargs);
}

std::string Template::run_jinja(const JinjaTemplate& t, ChatContext& c, const nlohmann::ordered_json& kwargs) const {
  c.bos_token = tokens_.bos;
  c.eos_token = tokens_.eos;
  // llama.cpp passes enable_thinking (true unless reasoning is turned off); templates such as
  // Qwen3's and Gemma 4's read it. Its chat_template_kwargs override it, the server's defaults
  // first, then the request's.
  c.extra.set(jinja::Value("enable_thinking"), jinja::Value(true));
  for (const nlohmann::ordered_json* layer : {&kwargs_, &kwargs})
    if (layer->is_object())
      for (const auto& [k, v] : layer->items()) c.extra.set(jinja::Value(k), jinja::from_json(v));
  std::string out = t.render_chat(c);
  if (tokens_.adds_bos && !tokens_.bos.empty() && out.starts_with(tokens_.bos)) out.erase(0, tokens_.bos.size());
  return out;
}

std::string Template::render(std::span<const Message> messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& kwargs) const {
  if (jinja_) {
    try {
      return render_jinja(messages, add_generation_prompt, kwargs);
    } catch (const Error& e) {
      if (!family_) throw;
      if (!fallback_said_->exchange(true))
        std::fprintf(stderr, "weft: the chat template failed to render (%s); using the built-in '%s' renderer\n",
                     e.message().c_str(), std::string(family_name(*family_)).c_str());
    }
  }
  return detail::render(*family_, messages, add_generation_prompt);
}

std::vector<std::string_view> Template::markers() const {
  return family_ ? info(*family_).markers : std::vector<std::string_view>{};
}

std::string render_suffix(const Template& tmpl, std::span<const Message> past, const Message& message,
                          bool add_generation_prompt) {
  const std::string before = past.empty() ? std::string() : tmpl.render(past, false);
  std::vector<Message> all(past.begin(), past.end());
  all.push_back(message);
  const std::string after = tmpl.render(all, add_generation_prompt);
  std::string out = add_generation_prompt && !before.empty() && before.back() == '\n' ? "\n" : "";
  return out + after.substr(std::min(before.size(), after.size()));
}

}  // namespace weft::chat
