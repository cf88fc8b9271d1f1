#include "tokenizer/tokenizer_pretok_custom.h"

#include "tokenizer/unicode.h"

namespace weft::tokenizer::detail {
namespace {

constexpr uint32_t kPastEnd = 0xFFFFFFFF;  // no class contains it

// Han ideographs as llama.cpp counts them (unicode_cpt_is_han): CJK unified ideographs and
// extensions A-F, compatibility ideographs and their supplement.
bool is_han(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2EBEF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// One piece of the text with the character classes the regexes use; nothing exists past its
// ends (a regex run on the piece alone sees no more).
class Chars {
 public:
  Chars(const ClassifiedText& t, Span piece) : t_(t), end_(piece.end) {}
  size_t end() const { return end_; }

  uint32_t cp(size_t i) const { return i < end_ ? t_.cps[i] : kPastEnd; }
  bool letter(size_t i) const { return has(i, ClassifiedText::kLetter); }
  bool number(size_t i) const { return has(i, ClassifiedText::kNumber); }
  bool space(size_t i) const { return has(i, ClassifiedText::kSpace); }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < end_ && t_.classes[i] == 0; }
  bool newline(size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }
  bool han(size_t i) const { return is_han(cp(i)); }
  bool letter_not_han(size_t i) const { return letter(i) && !han(i); }

  template <typename Pred>
  size_t run_end(size_t i, Pred pred, size_t max_len = SIZE_MAX) const {
    size_t k = i;
    while (k - i < max_len && (this->*pred)(k)) ++k;
    return k;
  }

 private:
  bool has(size_t i, uint8_t bit) const { return i < end_ && (t_.classes[i] & bit) != 0; }
  const ClassifiedText& t_;
  size_t end_;
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

// \s+(?!\S)|\s+ at a whitespace char i: the whole run when it ends the piece; otherwise the run
// minus its last char (which the next word takes as its optional leading space), but at least one.
size_t match_trailing_space(const Chars& c, size_t i) {
  const size_t k = c.run_end(i, &Chars::space);
  if (k == c.end() || k - i == 1) return k - i;
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

// Llama 3's alternatives after its words: \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3_rest(const Chars& c, size_t i) {
  if (c.number(i)) return c.run_end(i, &Chars::number, 3) - i;
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

size_t match_llama3(const Chars& c, size_t i) {
  if (size_t m = match_contraction(c, i, true)) return m;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!c.newline(i) && !c.letter(i) && !c.number(i) && c.letter(i + 1)) return c.run_end(i + 1, &Chars::letter) - i;
  if (c.letter(i)) return c.run_end(i, &Chars::letter) - i;
  return match_llama3_rest(c, i);
}

size_t match_kimi_k2(const Chars& c, size_t i) {
  if (c.han(i)) return c.run_end(i, &Chars::han) - i;
  // [^\r\n\p{L}\p{N}]?[letters but Han]+('s|'t|'re|'ve|'m|'ll|'d)?, any case
  size_t j = i;
  if (!c.newline(i) && !c.letter(i) && !c.number(i) && c.letter_not_han(i + 1)) j = i + 1;
  if (c.letter_not_han(j)) {
    const size_t k = c.run_end(j, &Chars::letter_not_han);
    return k + match_contraction(c, k, true) - i;
  }
  return match_llama3_rest(c, i);
}

// Words cut by a match function; a char no alternative matches is a word of its own (the
// regexes always match something, so this only guards against a bug looping forever).
template <typename Match>
void split_by(const Chars& c, Span piece, std::vector<Span>& out, Match match) {
  for (size_t i = piece.begin; i < piece.end;) {
    size_t n = match(c, i);
    if (n == 0) n = 1;
    out.push_back({i, i + n});
    i += n;
  }
}

// As llama.cpp's unicode_regex_split_custom_afmoe: each digit run is cut into its leading
// (length % 3) digits and then threes; the text before a run stays joined to its first cut
// (later regexes of the AFMoE list part them again, as no match spans a letter and a digit).
void split_afmoe_digits(const Chars& c, Span piece, std::vector<Span>& out) {
  size_t done = piece.begin;
  auto cut = [&](size_t at) {
    out.push_back({done, at});
    done = at;
  };
  for (size_t pos = piece.begin; pos < piece.end;) {
    if (!c.number(pos)) {
      ++pos;
      continue;
    }
    const size_t start = pos;
    pos = c.run_end(pos, &Chars::number);
    size_t at = start + (pos - start) % 3;
    if (at > start) cut(at);
    for (; at < pos; at += 3) cut(at + 3);
  }
  if (done < piece.end) cut(piece.end);
}

}  // namespace

std::string_view custom_split_pattern(CustomSplit which) {
  switch (which) {
    case CustomSplit::Gpt2: return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
    case CustomSplit::Llama3:
      return R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case CustomSplit::KimiK2: return R"(\p{Han}+)";
    case CustomSplit::AfmoeDigits: return R"(\p{AFMoE_digits})";
  }
  return {};
}

ClassifiedText::ClassifiedText(std::vector<uint32_t> code_points) : cps(std::move(code_points)) {
  classes.resize(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    classes[i] = (unicode::is_letter(cp) ? kLetter : 0) | (unicode::is_number(cp) ? kNumber : 0) |
                 (unicode::is_whitespace(cp) ? kSpace : 0);
  }
}

void custom_split(CustomSplit which, const ClassifiedText& text, Span piece, std::vector<Span>& out) {
  const Chars c(text, piece);
  switch (which) {
    case CustomSplit::Gpt2: split_by(c, piece, out, match_gpt2); break;
    case CustomSplit::Llama3: split_by(c, piece, out, match_llama3); break;
    case CustomSplit::KimiK2: split_by(c, piece, out, match_kimi_k2); break;
    case CustomSplit::AfmoeDigits: split_afmoe_digits(c, piece, out); break;
  }
}

}  // namespace weft::tokenizer::detail
