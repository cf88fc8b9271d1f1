// weft's regex engine against the behaviour of std::regex (ECMAScript) and std::regex_iterator
// that llama.cpp's pre-tokenizers rely on, worked out by hand from the ECMAScript rules.
#include "tokenizer/split_regex.h"

#include "core/error.h"
#include "support/expect_error.h"
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::tokenizer::detail {
namespace {

using Words = std::vector<std::string>;

// Pieces of `text` cut by `pattern`, as strings.
Words cut(std::string_view pattern, const std::string& text) {
  const SplitRegex rx(pattern);
  const auto decoded = unicode::decode_utf8(text);
  std::vector<uint32_t> cps;
  for (const auto& c : decoded) cps.push_back(c.cp);
  std::vector<Span> spans;
  rx.split(regex_units(rx.reads(), cps), {0, cps.size()}, spans);
  Words out;
  for (Span s : spans) {
    const size_t b = decoded[s.begin].offset;
    const size_t e = s.end < decoded.size() ? decoded[s.end].offset : text.size();
    out.push_back(text.substr(b, e - b));
  }
  return out;
}

TEST(SplitRegex, MatchesAndTheStretchesBetween) {
  EXPECT_EQ(cut("b+", "aabbbcb"), (Words{"aa", "bbb", "c", "b"}));
  EXPECT_EQ(cut("z", "abc"), (Words{"abc"}));
  EXPECT_EQ(cut("z", ""), Words{});
}

TEST(SplitRegex, AlternationIsOrderedNotLongest) {
  EXPECT_EQ(cut("a|ab", "abab"), (Words{"a", "b", "a", "b"}));
  EXPECT_EQ(cut("ab|a", "abab"), (Words{"ab", "ab"}));
}

TEST(SplitRegex, GreedyRunsGiveBackForWhatFollows) {
  EXPECT_EQ(cut(R"(\s+(?!\S)|\s+)", "a   b"), (Words{"a", "  ", " ", "b"}));
  EXPECT_EQ(cut(R"(\s*[\r\n]+)", "x \n \n y"), (Words{"x", " \n \n", " y"}));
  EXPECT_EQ(cut("a{2,3}", "aaaaaaa"), (Words{"aaa", "aaa", "a"}));
  EXPECT_EQ(cut("(ab){2}c?", "abababc"), (Words{"abab", "abc"}));
  EXPECT_EQ(cut("(?:ab)+c", "xababcab"), (Words{"x", "ababc", "ab"}));
}

TEST(SplitRegex, Lookaheads) {
  EXPECT_EQ(cut("a(?=b)", "aabab"), (Words{"a", "a", "b", "a", "b"}));
  EXPECT_EQ(cut("a(?!b)", "aab"), (Words{"a", "ab"}));
  // A letter that is not a-z, repeated: the lookahead folds into the set.
  EXPECT_EQ(cut(R"(((?=[\p{L}])([^a-z]))+)", "abCDéf1G"), (Words{"ab", "CDé", "f1", "G"}));
}

TEST(SplitRegex, EmptyMatchesCutAndMoveOn) {
  // Only lookaheads: every match is empty, each cuts the text (llama.cpp's SuperBPE digits).
  EXPECT_EQ(cut(R"((?=(\d{3})+(?!\d)))", "1234567"), (Words{"1", "234", "567"}));
  // After an empty match regex_iterator first tries a non-empty one at the same place.
  EXPECT_EQ(cut("x*", "axxb"), (Words{"a", "xx", "b"}));
}

TEST(SplitRegex, AnchorsAndWordBoundariesSeeOnlyThePiece) {
  EXPECT_EQ(cut(R"(\s+$)", "a  b  "), (Words{"a  b", "  "}));
  EXPECT_EQ(cut("^a", "aaa"), (Words{"a", "aa"}));
  EXPECT_EQ(cut(R"(\d{1,3}(?=(?:\d{3})*\b))", "1234567 89"), (Words{"1", "234", "567", " ", "89"}));
  EXPECT_EQ(cut(R"(\bx)", "xax x"), (Words{"x", "ax ", "x"}));
}

TEST(SplitRegex, ClassesAndEscapes) {
  EXPECT_EQ(cut(R"([^(\s|.,!?)]+)", "ab, c|d"), (Words{"ab", ", ", "c", "|", "d"}));
  EXPECT_EQ(cut(R"([\[-`]+)", "a[\\]^_`b"), (Words{"a", "[\\]^_`", "b"}));
  EXPECT_EQ(cut(R"([!-/:-@]+)", "a+-b:?c"), (Words{"a", "+-", "b", ":?", "c"}));
  EXPECT_EQ(cut(R"(\x41\u00e9+)", "xAééy"), (Words{"x", "Aéé", "y"}));
  EXPECT_EQ(cut("[一-龥]+", "ab中文cd"), (Words{"ab", "中文", "cd"}));
  EXPECT_EQ(cut(R"(\w+)", "ab_1 é"), (Words{"ab_1", " é"}));  // \w is ASCII
}

// A pattern naming a category sees llama.cpp's collapsed text: any letter is \p{Lu} and \p{Ll},
// non-ASCII whitespace is \s, and '~' is not \p{S} (its ASCII list has no '~').
TEST(SplitRegex, CategoriesAsLlamaCppCollapsesThem) {
  const SplitRegex letters(R"(\p{L}+)");
  EXPECT_EQ(letters.reads(), RegexText::Collapsed);
  EXPECT_EQ(SplitRegex("[a-z]+").reads(), RegexText::CodePoints);
  EXPECT_EQ(cut(R"(\p{L}+)", "héllo wörld 中文1"), (Words{"héllo", " ", "wörld", " ", "中文", "1"}));
  EXPECT_EQ(cut(R"(\p{Lu}+)", "abÉé1"), (Words{"abÉé", "1"}));  // ASCII lower case too, as [\xD2A-Za-z]
  EXPECT_EQ(cut(R"(\p{N}+)", "a12½٣b"), (Words{"a", "12½٣", "b"}));
  EXPECT_EQ(cut(R"(\p{S}+)", "a$+~€b"), (Words{"a", "$+", "~", "€", "b"}));
  EXPECT_EQ(cut(R"(\p{L}\s+\p{L})", "a\u3000\u00a0b"), (Words{"a\u3000\u00a0b"}));
  EXPECT_EQ(cut(R"([^\s\p{L}\p{N}]+)", "a!€́ b"), (Words{"a", "!€́", " b"}));
}

TEST(SplitRegex, OutsideTheSubsetIsAnError) {
  EXPECT_ERROR(SplitRegex("(?<=a)b"), "only (?: ), (?= ) and (?! ) groups");
  EXPECT_ERROR(SplitRegex("a+?"), "lazy and possessive");
  EXPECT_ERROR(SplitRegex("a**"), "nothing to repeat");
  EXPECT_ERROR(SplitRegex("[ab"), "unterminated [");
  EXPECT_ERROR(SplitRegex("(ab"), "expected ')'");
  EXPECT_ERROR(SplitRegex("ab)"), "unbalanced ')'");
  EXPECT_ERROR(SplitRegex("[z-a]"), "bad range");
  EXPECT_ERROR(SplitRegex(R"(\p{Han}+)"), "unknown category");
  EXPECT_ERROR(SplitRegex(R"([é\p{L}])"), "non-ASCII character beside");
  EXPECT_ERROR(SplitRegex("(a?)*"), "can match nothing");
  EXPECT_ERROR(SplitRegex(R"(\k)"), "unsupported escape");
  EXPECT_ERROR(SplitRegex("a{3,1}"), "m < n");
}

}  // namespace
}  // namespace weft::tokenizer::detail
