// Byte-level BPE (tokenizer.ggml.model "gpt2"), as llama.cpp's llm_tokenizer_bpe: pre-tokenize
// into words, map each word's bytes to GPT-2's printable symbols, then repeatedly merge the
// adjacent pair with the lowest merge rank (tokenizer.ggml.merges index).
#include "tokenizer/tokenizer_vocab.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <unordered_map>

namespace weft::tokenizer::detail {
namespace {

struct BpeSymbol {
  int prev, next;
  const char* text;
  size_t n;  // 0 once merged into its left neighbour
};

struct BpeBigram {
  int left, right;
  int rank;
  std::string text;  // left + right when queued; a mismatch later means it is stale
};
// Lowest rank first; on ties the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
struct BpeBigramLater {
  bool operator()(const BpeBigram& a, const BpeBigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Key of a merge pair. 0xFF never occurs in UTF-8, so no two pairs share a key.
std::string pair_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left);
  key += '\xFF';
  key.append(right);
  return key;
}

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizer pre)
      : vocab_(std::move(vocab)), pre_(std::move(pre)), ignore_merges_(pre_.flags().ignore_merges) {
    ranks_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      // "left right"; searching from 1 lets a merge whose left side is a space itself parse.
      const std::string& m = merges[i];
      const size_t at = m.find(' ', 1);
      if (at == std::string::npos) fail("tokenizer", "BPE merge {} ('{}') has no space", i, m);
      // emplace keeps the first rank of a duplicated merge, as llama.cpp's bpe_ranks does.
      ranks_.emplace(pair_key(std::string_view(m).substr(0, at), std::string_view(m).substr(at + 1)),
                     static_cast<int>(i));
    }
  }

  std::vector<Token> encode(const std::string& text, bool add_special, bool parse_special) const override {
    std::vector<Token> out;
    if (add_special && vocab_.add_bos) out.push_back(checked(vocab_.bos, "BOS"));
    for (const Fragment& f : split_special(vocab_, text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        for (std::string_view word : pre_.split(f.text)) encode_word(unicode::bytes_to_symbols(word), out);
      }
    }
    if (add_special && vocab_.add_eos) out.push_back(checked(vocab_.eos, "EOS"));
    return out;
  }

  std::string piece(Token id, bool special) const override {
    if (!vocab_.valid(id)) fail("tokenizer", "token id {} out of range [0, {})", id, vocab_.size());
    const std::string& text = vocab_.text[id];
    switch (vocab_.type[id]) {
      case TokenType::Normal: return unicode::symbols_to_bytes(text);
      case TokenType::UserDefined: return text;
      case TokenType::Control:
      case TokenType::Unknown: return special ? text : std::string();
      default: return {};  // byte / unused / undefined: suppressed, as llama.cpp does for BPE
    }
  }

  int32_t n_vocab() const override { return vocab_.size(); }
  Token bos() const override { return vocab_.bos; }
  bool adds_bos() const override { return vocab_.add_bos; }
  Token eos() const override { return vocab_.eos; }
  bool is_eog(Token id) const override { return std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), id); }

 private:
  Token checked(Token id, const char* what) const {
    if (id < 0) fail("tokenizer", "add_special asks for {} but the vocabulary has none", what);
    return id;
  }

  int rank(std::string_view left, std::string_view right) const {
    auto it = ranks_.find(pair_key(left, right));
    return it == ranks_.end() ? -1 : it->second;
  }

  // `word` is already in byte symbols; symbols start as its UTF-8 chars.
  void encode_word(const std::string& word, std::vector<Token>& out) const {
    // Llama 3 style: a word that is a token is taken whole, even if merges would not build it.
    if (ignore_merges_) {
      if (Token id = vocab_.find(word); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    std::vector<BpeSymbol> symbols;
    for (size_t offs = 0; offs < word.size();) {
      const size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(word[offs])), word.size() - offs);
      const int index = static_cast<int>(symbols.size());
      offs += n;
      symbols.push_back({index - 1, offs == word.size() ? -1 : index + 1, word.data() + offs - n, n});
    }
    std::priority_queue<BpeBigram, std::vector<BpeBigram>, BpeBigramLater> queue;
    auto add_bigram = [&](int left, int right) {
      if (left == -1 || right == -1) return;
      const std::string_view l(symbols[left].text, symbols[left].n);
      const std::string_view r(symbols[right].text, symbols[right].n);
      const int k = rank(l, r);
      if (k < 0) return;
      std::string both(l);
      both.append(r);
      queue.push({left, right, k, std::move(both)});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

    while (!queue.empty()) {
      const BpeBigram b = queue.top();
      queue.pop();
      BpeSymbol& left = symbols[b.left];
      BpeSymbol& right = symbols[b.right];
      if (left.n == 0 || right.n == 0) continue;
      if (left.n + right.n != b.text.size() || std::string_view(left.text, left.n + right.n) != b.text) {
        continue;  // one side changed since this pair was queued
      }
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = b.left;
      add_bigram(left.prev, b.left);
      add_bigram(b.left, left.next);
    }

    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
      const std::string_view s(symbols[i].text, symbols[i].n);
      if (Token id = vocab_.find(s); id >= 0) {
        out.push_back(id);
        continue;
      }
      // No token for the merged text: llama.cpp emits the tokens of its single bytes that exist
      // and drops the rest. A complete byte-level vocabulary never gets here.
      for (char c : s) {
        if (Token id = vocab_.find(std::string(1, c)); id >= 0) out.push_back(id);
      }
    }
  }

  Vocab vocab_;
  PreTokenizer pre_;
  bool ignore_merges_;
  std::unordered_map<std::string, int, TextHash, std::equal_to<>> ranks_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizer pre) {
  vocab.finish();
  return std::make_unique<BpeTokenizer>(std::move(vocab), merges, std::move(pre));
}

}  // namespace weft::tokenizer::detail
