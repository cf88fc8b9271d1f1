// Pre-tokenizers of byte-level BPE: split text into words before merging, exactly as the
// regexes of HF tokenizers / llama.cpp would, but written by hand (std::regex has no \p{L}).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace weft::tokenizer::detail {

enum class PreTokenizer {
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
           //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Qwen2,   // as Llama3 but \p{N} (one digit per word)
  Count,
};

// tokenizer.ggml.pre -> kind; nullopt for names we do not implement (callers fall back to Gpt2).
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// Words of `text`, in order; they tile the text exactly (concatenated they give it back).
// Invalid UTF-8 bytes count as non-letter, non-number, non-space characters.
std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace weft::tokenizer::detail
