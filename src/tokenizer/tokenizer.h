// Tokenizers read from GGUF metadata (tokenizer.ggml.*), behaving as llama.cpp's llama-vocab:
// SentencePiece ("llama"), byte-level BPE ("gpt2", with each of llama.cpp's pre-tokenizers),
// and "no_vocab" files (ids only).
#pragma once

#include "core/token.h"
#include "gguf/gguf_reader.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // add_special: add BOS/EOS as the file's add_bos_token/add_eos_token say (llama.cpp's
  // add_special); parse_special: recognise control tokens written in the text (e.g. "<s>").
  virtual std::vector<Token> encode(const std::string& text, bool add_special, bool parse_special = false) const = 0;
  // Text of one token as llama_token_to_piece prints it (SPM "▁" -> " ", byte tokens -> bytes,
  // control tokens -> empty unless `special`).
  virtual std::string piece(Token id, bool special = false) const = 0;
  // Concatenated pieces (special = false), without the space encode() prepended, so that
  // decode(encode(text, ...)) == text for valid UTF-8.
  std::string decode(const std::vector<Token>& ids) const;

  virtual int32_t n_vocab() const = 0;
  virtual Token bos() const = 0;                   // -1 when none
  virtual bool adds_bos() const { return false; }  // encode(..., add_special) puts BOS first
  virtual Token eos() const = 0;                   // -1 when none
  virtual bool is_eog(Token id) const = 0;         // end of generation: eos, eot, eom ...

 protected:
  // Whether encode() prepends a space (SPM's add_space_prefix), so decode() drops it again.
  virtual bool strips_prefix_space() const { return false; }
};

}  // namespace weft::tokenizer
