// Internal: the vocabulary every tokenizer kind shares (texts, scores, types, special ids), the
// split of text around special tokens, and the factories behind Tokenizer::from_gguf. Tests
// build Vocab directly to exercise SPM / BPE on tiny hand-made vocabularies.
#pragma once

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_pretok.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::tokenizer::detail {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Hash that lets id_of be searched with a string_view, without building a std::string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  std::vector<std::string> text;  // (n_vocab) as stored: SPM "▁" for space, BPE byte symbols
  std::vector<float> score;       // (n_vocab) SPM merge priority; zeros when the file has none
  std::vector<TokenType> type;    // (n_vocab)

  Token bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;  // SPM only: "Hello" is encoded as " Hello"

  // Filled by finish():
  // text -> id; the last duplicate wins, as in llama.cpp's token_to_id.
  std::unordered_map<std::string, Token, TextHash, std::equal_to<>> id_of;
  std::vector<Token> special;  // control / user-defined / unknown, longest text first
  std::vector<Token> eog;      // end-of-generation ids, sorted

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  Token find(std::string_view s) const;  // -1 when no token has this text
  bool valid(Token id) const { return id >= 0 && id < size(); }
  // Check sizes, fill score/type defaults, build the indexes above and the eog set.
  void finish();
};

// A piece of the input: either a special token found in the text or raw text between them.
struct Fragment {
  Token token = -1;       // >= 0: this special token
  std::string_view text;  // when token < 0
};
// llama.cpp's tokenizer_st_partition: user-defined tokens always split the text; control and
// unknown tokens only when parse_special. Longer tokens are matched first.
std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special);

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
// merges: "left right" strings, rank = index (tokenizer.ggml.merges); pre's flags say whether
// whole-word tokens skip the merges.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizer pre);
std::unique_ptr<Tokenizer> make_no_vocab_tokenizer(int32_t n_vocab);

}  // namespace weft::tokenizer::detail
