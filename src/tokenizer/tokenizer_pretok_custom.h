// Internal to the pre-tokenizer: the splits llama.cpp writes by hand (unicode.cpp,
// unicode_regex_split_custom) instead of running their regexes; each equals its regex (the
// tests run both).
#pragma once

#include "tokenizer/split_regex.h"

#include <string_view>

namespace weft::tokenizer::detail {

enum class CustomSplit {
  Gpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  Llama3,       // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  KimiK2,       // \p{Han}+, then Llama 3's split with Han excluded from letters and contractions
                //   kept on their word (tokenization_kimi.py)
  AfmoeDigits,  // digit runs cut into a leading 1-2 digits, then threes
};

// The regex llama.cpp recognises to run each split (its exact text in llama-vocab.cpp).
std::string_view custom_split_pattern(CustomSplit which);

// A text's code points with what the splits ask of each.
struct ClassifiedText {
  enum : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4 };
  std::vector<uint32_t> cps;
  std::vector<uint8_t> classes;  // kLetter | kNumber | kSpace bits, per code point

  explicit ClassifiedText(std::vector<uint32_t> code_points);
};

void custom_split(CustomSplit which, const ClassifiedText& text, Span piece, std::vector<Span>& out);

}  // namespace weft::tokenizer::detail
