#include "tokenizer/tokenizer_pretok.h"

#include "tokenizer/unicode.h"

namespace weft::tokenizer::detail {

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  // Names llama.cpp maps to these regexes (llama-vocab.cpp, load()). One exception: llama.cpp's
  // "default" BPE uses a different multi-regex split; weft treats it as GPT-2.
  if (name == "default" || name == "gpt-2" || name == "phi-2" || name == "jina-es" || name == "jina-de" ||
      name == "jina-v2-es" || name == "jina-v2-de") {
    return PreTokenizer::Gpt2;
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3" || name == "pixtral") {
    return PreTokenizer::Llama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "megrez") return PreTokenizer::Qwen2;
  return std::nullopt;
}

namespace {

constexpr uint32_t kPastEnd = 0xFFFFFFFF;  // no class contains it

// The text as code points, with the character classes the regexes use.
class Chars {
 public:
  explicit Chars(std::string_view text) : cps_(unicode::decode_utf8(text)) {}
  size_t size() const { return cps_.size(); }
  const unicode::CodePoint& operator[](size_t i) const { return cps_[i]; }

  uint32_t cp(size_t i) const { return i < cps_.size() ? cps_[i].cp : kPastEnd; }
  bool letter(size_t i) const { return i < cps_.size() && unicode::is_letter(cps_[i].cp); }
  bool number(size_t i) const { return i < cps_.size() && unicode::is_number(cps_[i].cp); }
  bool space(size_t i) const { return i < cps_.size() && unicode::is_whitespace(cps_[i].cp); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < cps_.size() && !space(i) && !letter(i) && !number(i); }
  bool newline(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }

  template <typename Pred>
  size_t run_end(size_t i, Pred pred, size_t max_len = SIZE_MAX) const {
    size_t k = i;
    while (k - i < max_len && (this->*pred)(k)) ++k;
    return k;
  }

 private:
  std::vector<unicode::CodePoint> cps_;
};

// 's|'t|'re|'ve|'m|'ll|'d (ASCII case-insensitive when any_case): length matched, 0 if none.
size_t match_contraction(const Chars& c, size_t i, bool any_case) {
  if (c.cp(i) != '\'') return 0;
  auto lower = [&](size_t k) {
    uint32_t v = c.cp(k);
    return any_case && v >= 'A' && v <= 'Z' ? v + ('a' - 'A') : v;
  };
  const uint32_t a = lower(i + 1), b = lower(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace char i: the whole run when it ends the text; otherwise the run
// minus its last char (which the next word takes as its optional leading space), but at least one.
size_t match_trailing_space(const Chars& c, size_t i) {
  const size_t k = c.run_end(i, &Chars::space);
  if (k == c.size() || k - i == 1) return k - i;
  return k - 1 - i;
}

size_t match_gpt2(const Chars& c, size_t i) {
  if (size_t m = match_contraction(c, i, false)) return m;
  const size_t j = i + (c.cp(i) == ' ' ? 1 : 0);  // " ?" is greedy; backing off never helps here
  if (c.letter(j)) return c.run_end(j, &Chars::letter) - i;
  if (c.number(j)) return c.run_end(j, &Chars::number) - i;
  if (c.other(j)) return c.run_end(j, &Chars::other) - i;
  if (c.space(i)) return match_trailing_space(c, i);
  return 0;
}

size_t match_llama3(const Chars& c, size_t i, size_t max_digits) {
  if (size_t m = match_contraction(c, i, true)) return m;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (i < c.size() && !c.newline(i) && !c.letter(i) && !c.number(i) && c.letter(i + 1)) {
    return c.run_end(i + 1, &Chars::letter) - i;
  }
  if (c.letter(i)) return c.run_end(i, &Chars::letter) - i;
  // \p{N}{1,max_digits}
  if (c.number(i)) return c.run_end(i, &Chars::number, max_digits) - i;
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  const size_t j = i + (c.cp(i) == ' ' ? 1 : 0);
  if (c.other(j)) return c.run_end(c.run_end(j, &Chars::other), &Chars::newline) - i;
  if (!c.space(i)) return 0;
  // \s*[\r\n]+: backtracking leaves the greedy \s* just before the run's last newline.
  const size_t k = c.run_end(i, &Chars::space);
  for (size_t r = k; r > i; --r) {
    if (c.newline(r - 1)) return r - i;
  }
  return match_trailing_space(c, i);
}

}  // namespace

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const Chars c(text);
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < c.size()) {
    size_t n = 0;
    switch (kind) {
      case PreTokenizer::Gpt2: n = match_gpt2(c, i); break;
      case PreTokenizer::Llama3: n = match_llama3(c, i, 3); break;
      case PreTokenizer::Qwen2: n = match_llama3(c, i, 1); break;
      case PreTokenizer::Count: break;
    }
    // Every char falls in some alternative of these regexes; a miss would be a bug here, but a
    // lone char as its own word is what HF does with text no alternative matches.
    if (n == 0) n = 1;
    const size_t begin = c[i].offset;
    const size_t end = i + n < c.size() ? c[i + n].offset : text.size();
    words.push_back(text.substr(begin, end - begin));
    i += n;
  }
  return words;
}

}  // namespace weft::tokenizer::detail
