// The regex subset of llama.cpp's pre-tokenizer patterns, matched as its std::regex (ECMAScript,
// leftmost match, ordered alternation, greedy backtracking) would, with std::regex_iterator's
// cutting of a text into matches and the stretches between them. Written by hand: std::regex
// knows no \p{L}, recurses per character and is slow.
//
// llama.cpp runs a pattern naming a category (\p{L}, \p{N}, \p{P}, \p{M}, \p{S}, \p{Lu} ...) over
// a "collapsed" text: ASCII as is, every other code point one byte naming its category, and
// \p{X} becomes "that byte or X's ASCII members". Other patterns see the code points, with
// non-ASCII whitespace turned into \v so that \s (ASCII only there) still matches it. Both are
// reproduced here (RegexText), so categories behave exactly as in llama.cpp, e.g. \p{Lu} is any
// letter and ASCII '~' is not \p{S}.
//
// Supported: literals, escapes (\s \S \d \D \w \W \b \B \r \n \t \v \f \0 \xHH \uHHHH, escaped
// punctuation), [..] classes with ranges and negation, ., ^, $, groups ( ) (?: ), lookahead
// (?= ) (?! ), alternation, greedy * + ? {n} {n,} {n,m}. Anything else is a weft::Error.
// Cost: linear in a piece for llama.cpp's patterns, but a lookahead that scans a run at every
// position of it (SuperBPE's and Tiny Aya's digit groups) is quadratic in the run, as in std::regex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace weft::tokenizer::detail {

// [begin, end) in units (code points) of a text.
struct Span {
  size_t begin = 0, end = 0;
};

enum class RegexText { CodePoints, Collapsed };

// The units a pattern of that kind reads, one per code point of `cps`.
std::vector<uint32_t> regex_units(RegexText kind, const std::vector<uint32_t>& cps);

class SplitRegex {
 public:
  explicit SplitRegex(std::string_view pattern);  // UTF-8; a weft::Error for syntax outside the subset
  ~SplitRegex();
  SplitRegex(SplitRegex&&) noexcept;
  SplitRegex& operator=(SplitRegex&&) noexcept;

  RegexText reads() const;
  // Cuts `piece` of `units` (regex_units(reads(), ...)) as llama.cpp's unicode_regex_split_stl:
  // each match and each stretch between matches, in order, is appended to `out`; empty ones
  // are left out (they hold no bytes to tokenize).
  void split(const std::vector<uint32_t>& units, Span piece, std::vector<Span>& out) const;

  struct Program;  // the compiled pattern (split_regex_program.h)

 private:
  std::unique_ptr<Program> program_;
};

}  // namespace weft::tokenizer::detail
