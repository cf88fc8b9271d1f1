// SentencePiece (tokenizer.ggml.model "llama"), as llama.cpp's llm_tokenizer_spm: start from one
// symbol per UTF-8 char, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring token, then spell pieces that are no token as their byte tokens <0xXX>.
#include "tokenizer/tokenizer_vocab.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <unordered_map>

namespace weft::tokenizer::detail {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁" U+2581, SentencePiece's space

struct SpmSymbol {
  int prev, next;  // neighbours in the live chain; -1 at the ends
  const char* text;
  size_t n;  // 0 once merged into its left neighbour
};

struct SpmBigram {
  int left, right;
  float score;
  size_t size;  // bytes of left + right when queued; a mismatch later means it is stale
};
// Highest score first; on ties the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct SpmBigramLess {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// One encode call's working state (llm_tokenizer_spm_session).
class SpmSession {
 public:
  explicit SpmSession(const Vocab& vocab) : vocab_(vocab) {}

  void tokenize(const std::string& text, std::vector<Token>& out) {
    // One symbol per UTF-8 char. llama.cpp sizes a symbol by its lead byte alone, so an invalid
    // lead swallows the bytes after it (even a following "▁"); decoding keeps such bytes apart,
    // which gives the same symbols on valid text and a lossless round trip on invalid text.
    const std::vector<unicode::CodePoint> chars = unicode::decode_utf8(text);
    for (size_t i = 0; i < chars.size(); ++i) {
      const int index = static_cast<int>(i);
      symbols_.push_back(
          {index - 1, i + 1 == chars.size() ? -1 : index + 1, text.data() + chars[i].offset, chars[i].n_bytes});
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);

    while (!queue_.empty()) {
      const SpmBigram b = queue_.top();
      queue_.pop();
      SpmSymbol& left = symbols_[b.left];
      SpmSymbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      try_add_bigram(left.prev, b.left);
      try_add_bigram(b.left, left.next);
    }
    for (int i = symbols_.empty() ? -1 : 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view text(symbols_[left].text, symbols_[left].n + symbols_[right].n);
    const Token id = vocab_.find(text);
    if (id < 0) return;
    queue_.push({left, right, vocab_.score[id], text.size()});
    // The last pair that formed this text is the one resegment() splits it back into.
    rev_merge_[std::string(text)] = {left, right};
  }

  // Emit a final symbol: its token if there is one, else undo the merges that built it, down to
  // single chars, which fall back to byte tokens.
  void resegment(const SpmSymbol& s, std::vector<Token>& out) const {
    const std::string_view text(s.text, s.n);
    if (Token id = vocab_.find(text); id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge_.find(text);
    if (it == rev_merge_.end()) {
      for (char c : text) out.push_back(byte_token(static_cast<uint8_t>(c)));
      return;
    }
    resegment(symbols_[it->second.first], out);
    resegment(symbols_[it->second.second], out);
  }

  Token byte_token(uint8_t byte) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const char name[7] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>', 0};
    if (Token id = vocab_.find(name); id >= 0) return id;
    // Some vocabularies hold the raw byte instead of <0xXX> (llama.cpp's byte_to_token fallback).
    if (Token id = vocab_.find(std::string(1, static_cast<char>(byte))); id >= 0) return id;
    fail("tokenizer", "SPM vocabulary has no byte token for 0x{:02X} (<0x{:02X}>)", byte, byte);
  }

  const Vocab& vocab_;
  std::vector<SpmSymbol> symbols_;
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmBigramLess> queue_;
  std::unordered_map<std::string, std::pair<int, int>, TextHash, std::equal_to<>> rev_merge_;
};

void replace_spaces(std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  for (char c : s) {
    if (c == ' ')
      out += kSpace;
    else
      out += c;
  }
  s = std::move(out);
}

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  std::vector<Token> encode(const std::string& text, bool add_special, bool parse_special) const override {
    std::vector<Token> out;
    if (add_special && vocab_.add_bos) out.push_back(checked(vocab_.bos, "BOS"));
    // A space is prepended to the text and to every run of text that follows a special token
    // (llama.cpp's "OG tokenizer behaviour": is_prev_special starts true).
    bool prev_special = true;
    for (const Fragment& f : split_special(vocab_, text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string s = vocab_.add_space_prefix && prev_special ? " " : "";
      s += f.text;
      replace_spaces(s);
      SpmSession(vocab_).tokenize(s, out);
      prev_special = false;
    }
    if (add_special && vocab_.add_eos) out.push_back(checked(vocab_.eos, "EOS"));
    return out;
  }

  std::string piece(Token id, bool special) const override {
    if (!vocab_.valid(id)) fail("tokenizer", "token id {} out of range [0, {})", id, vocab_.size());
    const std::string& text = vocab_.text[id];
    switch (vocab_.type[id]) {
      case TokenType::Normal: {
        std::string out;
        size_t at = 0;
        for (size_t next; (next = text.find(kSpace, at)) != std::string::npos; at = next + kSpace.size()) {
          out.append(text, at, next - at);
          out += ' ';
        }
        out.append(text, at);
        return out;
      }
      case TokenType::UserDefined: return text;
      case TokenType::Control:
      case TokenType::Unknown: return special ? text : std::string();
      case TokenType::Byte: return std::string(1, static_cast<char>(parse_byte(id)));
      default: return {};  // unused / undefined: suppressed like control tokens (llama.cpp)
    }
  }

  int32_t n_vocab() const override { return vocab_.size(); }
  Token bos() const override { return vocab_.bos; }
  bool adds_bos() const override { return vocab_.add_bos; }
  Token eos() const override { return vocab_.eos; }
  bool is_eog(Token id) const override { return std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), id); }

 protected:
  bool strips_prefix_space() const override { return vocab_.add_space_prefix; }

 private:
  Token checked(Token id, const char* what) const {
    if (id < 0) fail("tokenizer", "add_special asks for {} but the vocabulary has none", what);
    return id;
  }

  uint8_t parse_byte(Token id) const {
    const std::string& t = vocab_.text[id];
    // "<0xXX>"; a vocabulary that stores the raw byte has a one-byte text instead.
    if (t.size() == 1) return static_cast<uint8_t>(t[0]);
    unsigned v = 0;
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || std::sscanf(t.c_str() + 3, "%2x", &v) != 1) {
      fail("tokenizer", "byte token {} has text '{}', expected <0xXX>", id, t);
    }
    return static_cast<uint8_t>(v);
  }

  Vocab vocab_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
  vocab.finish();
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace weft::tokenizer::detail
