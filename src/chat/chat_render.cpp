// The renderers of chat_render.h. Each mirrors its branch of llama.cpp's llm_chat_apply_template,
// quirks included (roles a template does not know, spaces it trims or keeps), since a model was
// trained on exactly those bytes and tests compare against llama.cpp's expected strings.
#include "chat/chat_render.h"

#include "core/error.h"

#include <array>
#include <cctype>

namespace weft::chat::detail {

std::string trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

namespace {

using Chat = std::span<const Message>;

std::string upper_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Templates that write every message as the same function of (role, content) and end with a
// fixed opening for the assistant.
template <typename PerMessage>
std::string each(Chat chat, bool add_ass, std::string_view opening, PerMessage per_message) {
  std::string out;
  for (const Message& m : chat) per_message(out, m);
  if (add_ass) out += opening;
  return out;
}

// mistral-v1 / v3 / v3-tekken: the system prompt and the user message share one [INST] block.
std::string mistral(Family f, Chat chat) {
  const std::string lead = f == Family::MistralV1 ? " " : "";
  const std::string trail = f == Family::MistralV3Tekken ? "" : " ";
  const bool trim_assistant = f == Family::MistralV3;
  std::string out;
  bool inside_turn = false;
  for (const Message& m : chat) {
    if (!inside_turn) {
      out += lead + "[INST]" + trail;
      inside_turn = true;
    }
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + lead + "[/INST]";
    } else {
      out += trail + (trim_assistant ? trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

std::string mistral_v7(Family f, Chat chat) {
  const std::string sp = f == Family::MistralV7 ? " " : "";
  std::string out;
  for (const Message& m : chat) {
    if (m.role == "system")
      out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
    else if (m.role == "user")
      out += "[INST]" + sp + m.content + "[/INST]";
    else
      out += sp + m.content + "</s>";
  }
  return out;
}

// llama2 and its variants: system message in <<SYS>> or not, BOS between turns or not, trimmed
// messages or not. The leading "[INST] " stands for the turn BOS would open.
std::string llama2(Family f, Chat chat) {
  const bool system_block = f != Family::Llama2;
  const bool bos_inside = f == Family::Llama2SysBos;
  const bool strip = f == Family::Llama2SysStrip;
  std::string out = "[INST] ";
  bool inside_turn = true;
  for (const Message& m : chat) {
    const std::string content = strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      out += bos_inside ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      out += system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
    } else if (m.role == "user") {
      out += content + " [/INST]";
    } else {
      out += content + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

// Gemma has no system role: the system text opens the next user turn.
std::string gemma(Chat chat, bool add_ass) {
  std::string out, system;
  for (const Message& m : chat) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.content) + "<end_of_turn>\n";
  }
  if (add_ass) out += "<start_of_turn>model\n";
  return out;
}

// Orion: the system text joins the next user turn too.
std::string orion(Chat chat) {
  std::string out, system;
  for (const Message& m : chat) {
    if (m.role == "system") {
      system += m.content;
    } else if (m.role == "user") {
      out += "Human: ";
      if (!system.empty()) {
        out += system + "\n\n";
        system.clear();
      }
      out += m.content + "\n\nAssistant: </s>";
    } else {
      out += m.content + "</s>";
    }
  }
  return out;
}

std::string gigachat(Chat chat, bool add_ass) {
  const bool has_system = !chat.empty() && chat[0].role == "system";
  std::string out = has_system ? "<s>" + chat[0].content + "<|message_sep|>" : "<s>";
  for (size_t i = has_system ? 1 : 0; i < chat.size(); ++i) {
    if (chat[i].role == "user")
      out += "user<|role_sep|>" + chat[i].content + "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>";
    else if (chat[i].role == "assistant")
      out += "assistant<|role_sep|>" + chat[i].content + "<|message_sep|>";
  }
  if (add_ass) out += "assistant<|role_sep|>";
  return out;
}

std::string rwkv_world(Chat chat) {
  std::string out;
  for (size_t i = 0; i < chat.size(); ++i) {
    const Message& m = chat[i];
    if (m.role == "system") {
      out += "System: " + trim(m.content) + "\n\n";
    } else if (m.role == "user") {
      out += "User: " + trim(m.content) + "\n\n";
      if (i == chat.size() - 1) out += "Assistant:";
    } else if (m.role == "assistant") {
      out += "Assistant: " + trim(m.content) + "\n\n";
    }
  }
  return out;
}

std::string bailing(Family f, Chat chat, bool add_ass) {
  const bool v2 = f == Family::Bailing2;
  std::string out;
  if (v2 && (chat.empty() || chat[0].role != "system")) out += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
  for (const Message& m : chat) {
    out += "<role>" + (m.role == "user" ? std::string("HUMAN") : upper_ascii(m.role)) + "</role>" + m.content;
    if (v2) out += "<|role_end|>";
  }
  if (add_ass) out += f == Family::BailingThink ? "<role>ASSISTANT</role><think>" : "<role>ASSISTANT</role>";
  return out;
}

std::string hunyuan_dense(Chat chat) {
  std::string out;
  for (size_t i = 0; i < chat.size(); ++i) {
    const Message& m = chat[i];
    if (i == 0 && m.role == "system") out += m.content + "<｜hy_place▁holder▁no▁3｜>";
    if (m.role == "assistant")
      out += "<｜hy_Assistant｜>" + m.content + "<｜hy_place▁holder▁no▁2｜>";
    else if (m.role == "user")
      out += "<｜hy_User｜>" + m.content + "<｜hy_Assistant｜>";
  }
  return out;
}

std::string pangu_embed(Chat chat, bool add_ass) {
  std::string out;
  for (size_t i = 0; i < chat.size(); ++i) {
    const Message& m = chat[i];
    if (i == 0 && m.role != "system") out += "[unused9]系统：[unused10]";
    const char* label = m.role == "system"      ? "系统："
                        : m.role == "user"      ? "用户："
                        : m.role == "assistant" ? "助手："
                        : m.role == "tool"      ? "工具："
                        : m.role == "function"  ? "方法："
                                                : nullptr;
    if (label) out += "[unused9]" + std::string(label) + m.content + "[unused10]";
  }
  if (add_ass) out += "[unused9]助手：";
  return out;
}

// Templates that write each message as begin + role + mid + content + end (after `prefix`, once)
// and open the assistant's turn with `opening`.
struct Wrapped {
  Family family;
  std::string_view prefix, begin, mid, end, opening;
  bool trim;
};
constexpr Wrapped kWrapped[] = {
    {Family::ChatML, "", "<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", false},
    {Family::Phi3, "", "<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false},
    {Family::Phi4, "", "<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", false},
    {Family::Falcon3, "", "<|", "|>\n", "\n", "<|assistant|>\n", false},
    {Family::Zephyr, "", "<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false},
    {Family::Llama3, "", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n", true},
    {Family::Llama4, "", "<|header_start|>", "<|header_end|>\n\n", "<|eot|>",
     "<|header_start|>assistant<|header_end|>\n\n", true},
    {Family::GlmEdge, "", "<|", "|>\n", "", "<|assistant|>", false},
    {Family::ChatGlm3, "[gMASK]sop", "<|", "|>\n ", "", "<|assistant|>", false},
    {Family::ChatGlm4, "[gMASK]<sop>", "<|", "|>\n", "", "<|assistant|>\n", false},
    {Family::Megrez, "", "<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>",
     false},
};

// Templates that write each known role as before + content + after; `other` is how a role the
// template does not list is written ("": dropped, as several of llama.cpp's branches do).
struct RoleFormat {
  std::string_view role, before, after;
  bool trim = false;
};
struct ByRole {
  Family family;
  std::string_view prefix;
  std::array<RoleFormat, 4> roles;
  std::string_view other;  // the role whose format other roles take; "" drops them
  std::string_view opening;
};
const ByRole kByRole[] = {
    {Family::Vicuna,
     "",
     {{{"system", "", "\n\n"}, {"user", "USER: ", "\n"}, {"assistant", "ASSISTANT: ", "</s>\n"}}},
     "",
     "ASSISTANT:"},
    {Family::VicunaOrca,
     "",
     {{{"system", "SYSTEM: ", "\n"}, {"user", "USER: ", "\n"}, {"assistant", "ASSISTANT: ", "</s>\n"}}},
     "",
     "ASSISTANT:"},
    {Family::Deepseek,
     "",
     {{{"system", "", ""}, {"user", "### Instruction:\n", "\n"}, {"assistant", "### Response:\n", "\n<|EOT|>\n"}}},
     "",
     "### Response:\n"},
    {Family::Deepseek2,
     "",
     {{{"system", "", "\n\n"}, {"user", "User: ", "\n\n"}, {"assistant", "Assistant: ", "<｜end▁of▁sentence｜>"}}},
     "",
     "Assistant:"},
    {Family::Deepseek3,
     "",
     {{{"system", "", "\n\n"}, {"user", "<｜User｜>", ""}, {"assistant", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"}}},
     "",
     "<｜Assistant｜>"},
    {Family::CommandR,
     "",
     {{{"system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>", true},
       {"user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>", true},
       {"assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", true}}},
     "",
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {Family::Exaone3,
     "",
     {{{"system", "[|system|]", "[|endofturn|]\n", true},
       {"user", "[|user|]", "\n", true},
       {"assistant", "[|assistant|]", "[|endofturn|]\n", true}}},
     "",
     "[|assistant|]"},
    {Family::Exaone4,
     "",
     {{{"system", "[|system|]", "[|endofturn|]\n", true},
       {"user", "[|user|]", "\n", true},
       {"assistant", "[|assistant|]", "[|endofturn|]\n", true},
       {"tool", "[|tool|]", "[|endofturn|]\n", true}}},
     "",
     "[|assistant|]"},
    {Family::Yandex,
     "",
     {{{"user", " Пользователь: ", "\n\n"}, {"assistant", " Ассистент: ", "\n\n"}}},
     "",
     " Ассистент:[SEP]"},
    {Family::Grok2,
     "",
     {{{"system", "System: ", "<|separator|>\n\n", true},
       {"user", "Human: ", "<|separator|>\n\n", true},
       {"assistant", "Assistant: ", "<|separator|>\n\n"}}},
     "",
     "Assistant:"},
    {Family::Dots1,
     "",
     {{{"system", "<|system|>", "<|endofsystem|>"},
       {"user", "<|userprompt|>", "<|endofuserprompt|>"},
       {"assistant", "<|response|>", "<|endofresponse|>"}}},
     "assistant",
     "<|response|>"},
    // SmolVLM: <|im_start|> serves as BOS; the rest is not chatml.
    {Family::SmolVlm,
     "<|im_start|>",
     {{{"system", "", "\n\n"},
       {"user", "User: ", "<end_of_utterance>\n"},
       {"assistant", "Assistant: ", "<end_of_utterance>\n"}}},
     "assistant",
     "Assistant:"},
    // Hunyuan-MoE and MiniCPM have no generation prompt in llama.cpp either.
    {Family::HunyuanMoe,
     "",
     {{{"system", "<|startoftext|>", "<|extra_4|>"},
       {"user", "<|startoftext|>", "<|extra_0|>"},
       {"assistant", "", "<|eos|>"}}},
     "user",
     ""},
    {Family::MiniCpm, "", {{{"user", "<用户>", "<AI>", true}, {"assistant", "", "", true}}}, "assistant", ""},
    {Family::KimiK2,
     "",
     {{{"system", "<|im_system|>system<|im_middle|>", "<|im_end|>"},
       {"user", "<|im_user|>user<|im_middle|>", "<|im_end|>"},
       {"assistant", "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"},
       {"tool", "<|im_system|>tool<|im_middle|>", "<|im_end|>"}}},
     "",
     "<|im_assistant|>assistant<|im_middle|>"},
};

std::string wrapped(const Wrapped& w, Chat chat, bool add_ass) {
  std::string out(w.prefix);
  for (const Message& m : chat)
    out += std::string(w.begin) + m.role + std::string(w.mid) + (w.trim ? trim(m.content) : m.content) +
           std::string(w.end);
  if (add_ass) out += w.opening;
  return out;
}

std::string by_role(const ByRole& b, Chat chat, bool add_ass) {
  auto format_of = [&b](std::string_view role) -> const RoleFormat* {
    for (const RoleFormat& r : b.roles)
      if (!r.role.empty() && r.role == role) return &r;
    return nullptr;
  };
  std::string out(b.prefix);
  for (const Message& m : chat) {
    const RoleFormat* r = format_of(m.role);
    if (!r && !b.other.empty()) r = format_of(b.other);
    // Kimi-K2 writes the content and its end for roles it has no header for, too.
    if (!r && b.family == Family::KimiK2) out += m.content + "<|im_end|>";
    if (r) out += std::string(r->before) + (r->trim ? trim(m.content) : m.content) + std::string(r->after);
  }
  if (add_ass) out += b.opening;
  return out;
}

// The families whose message text depends on its role in ways no table above says.
std::string per_message(Family f, Chat chat, bool add_ass) {
  using M = const Message&;
  switch (f) {
    case Family::Monarch:  // BOS between messages; the first one's BOS comes from tokenizing
      return each(chat, add_ass, "<s>assistant\n", [first = true](std::string& o, M m) mutable {
        o += (first ? "" : "<s>") + m.role + "\n" + m.content + "</s>\n";
        first = false;
      });
    case Family::OpenChat:
      return each(chat, add_ass, "GPT4 Correct Assistant:", [](std::string& o, M m) {
        if (m.role == "system") {
          o += m.content + "<|end_of_turn|>";
          return;
        }
        std::string role = m.role;
        if (!role.empty()) role[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(role[0])));
        o += "GPT4 Correct " + role + ": " + m.content + "<|end_of_turn|>";
      });
    case Family::Granite:
      return each(chat, add_ass, "<|start_of_role|>assistant<|end_of_role|>", [](std::string& o, M m) {
        o += "<|start_of_role|>" + m.role + "<|end_of_role|>" +
             (m.role == "assistant_tool_call" ? "<|tool_call|>" : "") + m.content + "<|end_of_text|>\n";
      });
    case Family::GptOss:
      return each(chat, add_ass, "<|start|>assistant", [](std::string& o, M m) {
        o += "<|start|>" + m.role + "<|message|>" + m.content + (m.role == "assistant" ? "<|return|>" : "<|end|>");
      });
    case Family::SeedOss:
      return each(chat, add_ass, "<seed:bos>assistant\n", [](std::string& o, M m) {
        o += "<seed:bos>" + m.role + "\n" + (m.role == "assistant" ? trim(m.content) : m.content) + "<seed:eos>";
      });
    default: break;
  }
  for (const Wrapped& w : kWrapped)
    if (w.family == f) return wrapped(w, chat, add_ass);
  for (const ByRole& b : kByRole)
    if (b.family == f) return by_role(b, chat, add_ass);
  fail("chat", "template family {} has no renderer", static_cast<int>(f));
}

}  // namespace

std::string render(Family f, std::span<const Message> chat, bool add_ass) {
  switch (f) {
    case Family::MistralV1:
    case Family::MistralV3:
    case Family::MistralV3Tekken: return mistral(f, chat);
    case Family::MistralV7:
    case Family::MistralV7Tekken: return mistral_v7(f, chat);
    case Family::Llama2:
    case Family::Llama2Sys:
    case Family::Llama2SysBos:
    case Family::Llama2SysStrip: return llama2(f, chat);
    case Family::Gemma: return gemma(chat, add_ass);
    case Family::Orion: return orion(chat);
    case Family::GigaChat: return gigachat(chat, add_ass);
    case Family::RwkvWorld: return rwkv_world(chat);
    case Family::Bailing:
    case Family::BailingThink:
    case Family::Bailing2: return bailing(f, chat, add_ass);
    case Family::HunyuanDense: return hunyuan_dense(chat);
    case Family::PanguEmbed: return pangu_embed(chat, add_ass);
    default: return per_message(f, chat, add_ass);
  }
}

}  // namespace weft::chat::detail
