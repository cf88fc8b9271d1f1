// Pre-tokenizers of byte-level BPE: split text into words before merging, as llama.cpp does for
// each tokenizer.ggml.pre name (llama-vocab.cpp, llm_tokenizer_bpe): a list of regexes applied
// one after the other, each cutting every piece the previous ones left into its matches and the
// stretches between them. Four of them llama.cpp matches with hand-written code (GPT-2, Llama 3,
// Kimi-K2, AFMoE digits), and so does weft (tokenizer_pretok_custom.cpp); the others run on
// weft's regex engine (split_regex.h), which reproduces llama.cpp's std::regex semantics.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::tokenizer::detail {

// What a pre-tokenizer name also changes in llama.cpp's vocabulary (llama_vocab::impl::load).
struct PreTokenizerFlags {
  bool ignore_merges = false;  // a word that is a token is taken whole, even if merges would not build it
  bool add_bos = false;        // default of add_bos_token (the file's key overrides it)
  bool no_bos = false;         // no BOS token by default (ChatGLM)
};

class PreTokenizer {
 public:
  // tokenizer.ggml.pre -> llama.cpp's split for it; a weft::Error naming an unknown name, or one
  // weft does not implement (SPM-style BPE over raw UTF-8: gemma4, sarvam-moe ...).
  static PreTokenizer from_name(std::string_view name);

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }  // llama.cpp's LLAMA_VOCAB_PRE_TYPE_*, lower case
  const PreTokenizerFlags& flags() const { return flags_; }

  // Words of `text`, in order; they tile the text exactly (concatenated they give it back).
  // Invalid UTF-8 bytes count as U+FFFD (a symbol) and keep their bytes.
  std::vector<std::string_view> split(std::string_view text) const;

  struct Step;  // one regex, or one of llama.cpp's hand-written splits

 private:
  std::string name_, type_;
  PreTokenizerFlags flags_;
  std::shared_ptr<const std::vector<Step>> steps_;  // shared by every tokenizer of the type
};

}  // namespace weft::tokenizer::detail
