// Tokenizer::from_gguf: read tokenizer.ggml.* into a Vocab with llama.cpp's defaults and pick
// the implementation; plus decode() and the no-vocabulary tokenizer.
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/tokenizer_vocab.h"

#include <fmt/core.h>

namespace weft::tokenizer {
namespace detail {
namespace {

void warn(const std::string& what) { fmt::print(stderr, "[tokenizer] warning: {}\n", what); }

// Files that carry weights but no tokenizer ("no_vocab"): ids in, ids out.
class NoVocabTokenizer final : public Tokenizer {
 public:
  explicit NoVocabTokenizer(int32_t n_vocab) : n_vocab_(n_vocab) {}
  std::vector<Token> encode(const std::string&, bool, bool) const override { no_vocab(); }
  std::string piece(Token, bool) const override { no_vocab(); }
  int32_t n_vocab() const override { return n_vocab_; }
  Token bos() const override { return -1; }
  Token eos() const override { return -1; }
  bool is_eog(Token) const override { return false; }

 private:
  [[noreturn]] static void no_vocab() { fail("tokenizer", "this model has no vocabulary; pass token ids"); }
  int32_t n_vocab_;
};

TokenType token_type_from(int64_t v, size_t index) {
  if (v < 0 || v > static_cast<int64_t>(TokenType::Byte)) {
    fail("tokenizer", "tokenizer.ggml.token_type[{}] = {} is not a token type (0..6)", index, v);
  }
  return static_cast<TokenType>(v);
}

// tokens, scores, types: the parts every vocabulary kind has.
Vocab read_tokens(const gguf::File& f) {
  Vocab v;
  v.text = f.get_string_array("tokenizer.ggml.tokens");
  if (v.text.empty()) fail("tokenizer", "tokenizer.ggml.tokens is empty");
  if (v.text.size() > static_cast<size_t>(INT32_MAX)) {
    fail("tokenizer", "tokenizer.ggml.tokens has {} entries, more than token ids can hold", v.text.size());
  }
  for (size_t i = 0; i < v.text.size(); ++i) {
    // llama.cpp names empty tokens so that they stay unique and visible.
    if (v.text[i].empty()) v.text[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  if (f.find("tokenizer.ggml.scores")) v.score = f.get_float_array("tokenizer.ggml.scores");
  if (f.find("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    v.type.reserve(types.size());
    for (size_t i = 0; i < types.size(); ++i) v.type.push_back(token_type_from(types[i], i));
  }
  if (!v.score.empty() && v.score.size() != v.text.size()) {
    fail("tokenizer", "tokenizer.ggml.scores has {} entries for {} tokens", v.score.size(), v.text.size());
  }
  if (!v.type.empty() && v.type.size() != v.text.size()) {
    fail("tokenizer", "tokenizer.ggml.token_type has {} entries for {} tokens", v.type.size(), v.text.size());
  }
  return v;
}

// Special ids and add_* flags written in the file override the kind's defaults; an id past the
// vocabulary keeps the default, with a warning, as llama.cpp does.
void read_specials(const gguf::File& f, Vocab& v) {
  const std::pair<const char*, Token*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},     {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.unknown_token_id", &v.unk}, {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
  };
  for (const auto& [key, id] : ids) {
    const std::optional<int64_t> x = f.get_int_opt(key);
    if (!x) continue;
    if (*x < 0 || *x >= v.size()) {
      warn(fmt::format("bad special token {} = {} (vocabulary of {}), using default {}", key, *x, v.size(), *id));
      continue;
    }
    *id = static_cast<Token>(*x);
  }
  if (auto b = f.get_bool_opt("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = f.get_bool_opt("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
}

int32_t model_vocab_size(const gguf::File& f) {
  if (auto arch = f.get_string_opt("general.architecture")) {
    if (auto n = f.get_int_opt(*arch + ".vocab_size"); n && *n > 0 && *n <= INT32_MAX) return static_cast<int32_t>(*n);
  }
  // token_embd.weight is (n_embd, n_vocab) in ggml order.
  if (const gguf::TensorInfo* t = f.find_tensor("token_embd.weight"); t && t->shape.size() >= 2) {
    if (t->shape[1] > 0 && t->shape[1] <= INT32_MAX) return static_cast<int32_t>(t->shape[1]);
  }
  fail("tokenizer", "no_vocab model: neither {}.vocab_size nor token_embd.weight gives the vocabulary size",
       f.get_string_opt("general.architecture").value_or("<arch>"));
}

std::unique_ptr<Tokenizer> load_spm(const gguf::File& f) {
  Vocab v = read_tokens(f);
  // llama.cpp's SPM defaults: <unk> 0, <s> 1, </s> 2, BOS added, EOS not.
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = f.get_bool_opt("tokenizer.ggml.add_space_prefix").value_or(true);
  read_specials(f, v);
  return make_spm_tokenizer(std::move(v));
}

std::unique_ptr<Tokenizer> load_bpe(const gguf::File& f) {
  Vocab v = read_tokens(f);
  // As llama.cpp: a file without a pre-tokenizer name gets the "default" split, with a warning.
  const std::string pre_name = f.get_string_opt("tokenizer.ggml.pre").value_or("");
  if (pre_name.empty()) warn("no tokenizer.ggml.pre; using llama.cpp's 'default' pre-tokenizer");
  PreTokenizer pre = PreTokenizer::from_name(pre_name.empty() ? "default" : pre_name);

  std::vector<std::string> merges;
  if (f.find("tokenizer.ggml.merges")) {
    merges = f.get_string_array("tokenizer.ggml.merges");
  } else if (pre.type() != "kimi-k2") {  // llama.cpp lets Kimi-K2 go without merges
    fail("tokenizer", "gpt2 tokenizer without tokenizer.ggml.merges");
  }
  // llama.cpp's BPE defaults (token 11 for BOS/EOS is its historical default); some
  // pre-tokenizers add BOS or have none.
  v.bos = pre.flags().no_bos ? -1 : 11;
  v.eos = 11, v.unk = -1;
  v.add_bos = pre.flags().add_bos;
  v.add_eos = false;
  v.add_space_prefix = false;
  read_specials(f, v);
  return make_bpe_tokenizer(std::move(v), merges, std::move(pre));
}

}  // namespace
}  // namespace detail

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  // A file without tokenizer.ggml.model has no vocabulary to use: treat it as "no_vocab".
  const std::string model = file.get_string_opt("tokenizer.ggml.model").value_or("no_vocab");
  if (model == "llama") return detail::load_spm(file);
  if (model == "gpt2") return detail::load_bpe(file);
  if (model == "no_vocab" || model == "none") {
    return detail::make_no_vocab_tokenizer(detail::model_vocab_size(file));
  }
  fail("tokenizer", "tokenizer.ggml.model '{}' is not supported (weft has llama, gpt2, no_vocab)", model);
}

std::string Tokenizer::decode(const std::vector<Token>& ids) const {
  std::string out;
  bool strip = strips_prefix_space();
  for (Token id : ids) {
    std::string p = piece(id, false);
    if (strip && !p.empty()) {
      if (p[0] == ' ') p.erase(0, 1);
      strip = false;
    }
    out += p;
  }
  return out;
}

namespace detail {
std::unique_ptr<Tokenizer> make_no_vocab_tokenizer(int32_t n_vocab) {
  return std::make_unique<NoVocabTokenizer>(n_vocab);
}
}  // namespace detail

}  // namespace weft::tokenizer
