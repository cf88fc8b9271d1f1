#include "tokenizer/tokenizer_vocab.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <initializer_list>

namespace weft::tokenizer::detail {

Token Vocab::find(std::string_view s) const {
  auto it = id_of.find(s);
  return it == id_of.end() ? -1 : it->second;
}

namespace {

// Texts llama.cpp treats as end of turn / end of message when the file names no id for them
// (llama-vocab.cpp, load(): the special_eot_id / special_eog_ids search).
constexpr std::array<std::string_view, 10> kEndOfTurnTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>",
    "<|return|>", "<|call|>",
};
constexpr std::string_view kEndOfMessageText = "<|eom_id|>";

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

}  // namespace

void Vocab::finish() {
  const size_t n = text.size();
  if (score.empty()) score.assign(n, 0.0f);
  if (type.empty()) type.assign(n, TokenType::Normal);
  if (score.size() != n || type.size() != n) {
    fail("tokenizer", "vocabulary has {} tokens but {} scores and {} types", n, score.size(), type.size());
  }
  id_of.clear();
  id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) id_of[text[i]] = static_cast<Token>(i);
  // gpt-oss's harmony format (its vocabulary ends replies with <|return|> and <|call|>): the
  // tokens that frame a message are text a reply keeps, so that its channels can be parsed
  // (llama-vocab.cpp's "quick hack for gpt-oss" renders them as user-defined; <|end|>, which ends
  // each message of a reply, is among the tokens llama-server preserves in a chat reply's text), and
  // <|end|> does not end the generation (removed from the EOG ids below). DeepSeek's tool-call
  // markers are control tokens in its files (convert_hf_to_gguf.py takes "<｜...｜>" for special)
  // that llama-server also preserves: a call is text its parser and a forced call's grammar read.
  const bool harmony = find("<|return|>") >= 0 && find("<|call|>") >= 0;
  const auto keep_as_text = [&](std::initializer_list<std::string_view> texts) {
    for (std::string_view s : texts)
      if (Token id = find(s); id >= 0 && type[id] == TokenType::Control) type[id] = TokenType::UserDefined;
  };
  if (harmony) keep_as_text({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", "<|end|>"});
  if (find("<｜tool▁calls▁begin｜>") >= 0)
    keep_as_text({"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                  "<｜tool▁sep｜>"});
  special.clear();
  for (size_t i = 0; i < n; ++i)
    if (is_special_type(type[i])) special.push_back(static_cast<Token>(i));
  // Longest first so "<|im_end|>" wins over a "<|im" that would split it; ties by id for a
  // deterministic order (llama.cpp leaves ties to std::sort).
  std::stable_sort(special.begin(), special.end(), [&](Token a, Token b) { return text[a].size() > text[b].size(); });

  for (Token* id : {&bos, &eos, &unk, &eot, &eom}) {
    if (*id >= static_cast<Token>(n)) *id = -1;
  }
  const auto special_with = [&](std::string_view s) {
    const Token id = find(s);
    return id >= 0 && is_special_type(type[id]) ? id : -1;
  };
  if (eot < 0) {
    for (std::string_view s : kEndOfTurnTexts) {
      if ((eot = special_with(s)) >= 0) break;
    }
  }
  if (eom < 0) eom = special_with(kEndOfMessageText);

  eog.clear();
  for (Token id : {eos, eot, eom}) {
    if (id >= 0) eog.push_back(id);
  }
  for (std::string_view s : kEndOfTurnTexts) {
    if (Token id = special_with(s); id >= 0) eog.push_back(id);
  }
  if (harmony) std::erase(eog, find("<|end|>"));
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
}

std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  for (Token id : vocab.special) {
    const TokenType t = vocab.type[id];
    // Control and unknown tokens are literal text unless asked; user-defined ones always split
    // (HF tokenizers pre-tokenize added tokens before everything else).
    if (!parse_special && t != TokenType::UserDefined) continue;
    const std::string& needle = vocab.text[id];
    if (needle.empty()) continue;
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t at; (at = rest.find(needle)) != std::string_view::npos;) {
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({id, {}});
        rest.remove_prefix(at + needle.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    frags = std::move(next);
  }
  return frags;
}

}  // namespace weft::tokenizer::detail
