// Tokenizers against llama.cpp's own test vectors (test-tokenizer-0: add_special = false,
// parse_special = false), stories260K's known prompt, and tiny in-memory vocabularies whose
// expected ids are worked out by hand from the algorithms.
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_pretok.h"
#include "tokenizer/tokenizer_vocab.h"
#include "tokenizer/unicode.h"

#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace weft::tokenizer {
namespace {

using detail::PreTokenizer;
using detail::TokenType;
using detail::Vocab;
namespace uni = unicode;

const std::string kShared = WEFT_SHARED_DIR;
const std::string kVocabDir = kShared + "/models/vocab/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Tokenizer> load(const std::string& path) {
  auto file = gguf::File::open(path);
  return Tokenizer::from_gguf(*file);
}

// ---------------------------------------------------------------------------------------------
// Unicode

TEST(Unicode, TableIsSortedAndCoversFromZero) {
  ASSERT_GT(uni::kCategoryRangeCount, 1000u);  // a real table, not a stub
  EXPECT_EQ(uni::kCategoryRanges[0].first, 0u);
  for (size_t i = 1; i < uni::kCategoryRangeCount; ++i) {
    ASSERT_LT(uni::kCategoryRanges[i - 1].first, uni::kCategoryRanges[i].first) << i;
    ASSERT_NE(uni::kCategoryRanges[i - 1].category, uni::kCategoryRanges[i].category) << i;  // merged
  }
}

TEST(Unicode, CategoriesOfKnownCodePoints) {
  using C = uni::Category;
  const std::pair<uint32_t, C> cases[] = {
      {'A', C::Letter},
      {'z', C::Letter},
      {0xE9, C::Letter} /* é */,
      {0x4E2D, C::Letter} /* 中 */,
      {0x0416, C::Letter} /* Ж */,
      {0x1780, C::Letter} /* Khmer ka */,
      {'0', C::Number},
      {0xBD, C::Number} /* ½ */,
      {0x0663, C::Number} /* Arabic-Indic 3 */,
      {0x2164, C::Number} /* Roman V, Nl */,
      {',', C::Punctuation},
      {'\'', C::Punctuation},
      {0x3002, C::Punctuation} /* 。 */,
      {'$', C::Symbol},
      {0x20AC, C::Symbol} /* € */,
      {0x1F999, C::Symbol} /* 🦙 */,
      {0x0301, C::Mark},
      {0x17B6, C::Mark} /* Khmer aa */,
      {' ', C::Separator},
      {0x3000, C::Separator},
      {'\n', C::Other},
      {0x200D, C::Other} /* ZWJ */,
      {0xE000, C::Other} /* private use */,
      {0x10FFFF, C::Other},
      {0x110000, C::Other},
  };
  for (const auto& [cp, cat] : cases) {
    EXPECT_EQ(static_cast<int>(uni::category(cp)), static_cast<int>(cat)) << std::hex << cp;
  }
}

TEST(Unicode, WhitespaceIsTheWhiteSpaceProperty) {
  const std::set<uint32_t> ws = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,   0x1680,
                                 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  int n = 0;
  for (uint32_t cp = 0; cp < 0x11000; ++cp) n += uni::is_whitespace(cp);
  EXPECT_EQ(n, static_cast<int>(ws.size()));
  for (uint32_t cp : ws) EXPECT_TRUE(uni::is_whitespace(cp)) << std::hex << cp;
  EXPECT_FALSE(uni::is_whitespace(0x200B));  // zero width space is Cf, not White_Space
  EXPECT_FALSE(uni::is_whitespace(0x1C));
}

TEST(Unicode, DecodeKeepsOffsetsAndReplacesInvalidBytes) {
  // "a", "é" (2 bytes), "€" (3), "🦙" (4), stray continuation, overlong "/" (C0 AF), truncated.
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99\x80\xC0\xAF\xE2\x82";
  const auto cps = uni::decode_utf8(s);
  const std::vector<uint32_t> want = {'a',
                                      0xE9,
                                      0x20AC,
                                      0x1F999,
                                      uni::kReplacement,
                                      uni::kReplacement,
                                      uni::kReplacement,
                                      uni::kReplacement,
                                      uni::kReplacement};
  ASSERT_EQ(cps.size(), want.size());
  size_t offset = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    EXPECT_EQ(cps[i].cp, want[i]) << i;
    EXPECT_EQ(cps[i].offset, offset) << i;
    offset += cps[i].n_bytes;
  }
  EXPECT_EQ(offset, s.size());
  std::string back;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F999u}) uni::append_utf8(back, cp);
  EXPECT_EQ(back, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99");
}

TEST(Unicode, Gpt2ByteMapIsABijection) {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& sym = uni::byte_to_symbol(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(sym).second) << b;
    const auto cps = uni::decode_utf8(sym);
    ASSERT_EQ(cps.size(), 1u);
    EXPECT_EQ(uni::symbol_to_byte(cps[0].cp), b);
  }
  // Values from GPT-2's bytes_to_unicode: printable ASCII is itself, space -> U+0120 'Ġ',
  // newline -> U+010A 'Ċ', 0xAD (soft hyphen, the last non-printable) -> U+0143.
  EXPECT_EQ(uni::byte_to_symbol('A'), "A");
  EXPECT_EQ(uni::byte_to_symbol(' '), "\xC4\xA0");
  EXPECT_EQ(uni::byte_to_symbol('\n'), "\xC4\x8A");
  EXPECT_EQ(uni::byte_to_symbol(0xAD), "\xC5\x83");
  EXPECT_EQ(uni::symbol_to_byte('A' + 0x300), -1);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(uni::symbols_to_bytes(uni::bytes_to_symbols(all)), all);
}

// ---------------------------------------------------------------------------------------------
// Tiny vocabularies

// <unk> <s> </s>, 256 byte tokens, then `pieces` with their scores (ids from 259).
Vocab tiny_spm(const std::vector<std::pair<std::string, float>>& pieces) {
  Vocab v;
  auto add = [&](std::string t, float s, TokenType type) {
    v.text.push_back(std::move(t));
    v.score.push_back(s);
    v.type.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  for (const auto& [t, s] : pieces) add(t, s, TokenType::Normal);
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.add_bos = true;
  return v;
}

constexpr Token kFirstPiece = 259;

TEST(Spm, HighestScoreMergesFirst) {
  // "▁abc": "bc" (score -1) beats "▁a" (-2) and "ab" (-3); then "▁a"+"bc" is no token, so the
  // result is ▁a, bc. With "ab" best instead, ▁+ab -> "▁ab" exists -> ▁ab, c.
  const std::string sp = "\xE2\x96\x81";
  auto t1 = detail::make_spm_tokenizer(
      tiny_spm({{sp, -5}, {"a", -5}, {"b", -5}, {"c", -5}, {sp + "a", -2}, {"ab", -3}, {"bc", -1}, {sp + "ab", -4}}));
  EXPECT_EQ(t1->encode("abc", false), (std::vector<Token>{kFirstPiece + 4, kFirstPiece + 6}));
  auto t2 = detail::make_spm_tokenizer(
      tiny_spm({{sp, -5}, {"a", -5}, {"b", -5}, {"c", -5}, {sp + "a", -2}, {"ab", -1}, {"bc", -3}, {sp + "ab", -4}}));
  // ab (-1) first; then ▁+ab = "▁ab" (-4) is the only pair left.
  EXPECT_EQ(t2->encode("abc", false), (std::vector<Token>{kFirstPiece + 7, kFirstPiece + 3}));
  EXPECT_EQ(t2->encode("abc", true), (std::vector<Token>{1, kFirstPiece + 7, kFirstPiece + 3}));
  EXPECT_EQ(t2->decode(t2->encode("abc", true)), "abc");
}

TEST(Spm, UnknownCharsFallBackToBytes) {
  const std::string sp = "\xE2\x96\x81";
  auto t = detail::make_spm_tokenizer(tiny_spm({{sp, -1}, {"a", -1}}));
  // "é" = C3 A9 has no piece: its bytes <0xC3> <0xA9> are ids 3 + byte.
  EXPECT_EQ(t->encode("a\xC3\xA9", false), (std::vector<Token>{kFirstPiece, kFirstPiece + 1, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->piece(3 + 0xC3), "\xC3");
  EXPECT_EQ(t->piece(kFirstPiece), " ");
  EXPECT_EQ(t->piece(1), "");
  EXPECT_EQ(t->piece(1, true), "<s>");
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9 a", false)), "a\xC3\xA9 a");
  EXPECT_ERROR(t->piece(10000), "token id 10000 out of range");
}

TEST(Spm, ParseSpecialAndSpacePrefix) {
  const std::string sp = "\xE2\x96\x81";
  Vocab v = tiny_spm({{sp, -1}, {"a", -1}, {sp + "a", -0.5f}});
  auto t = detail::make_spm_tokenizer(v);
  // Without parse_special "<s>" is text (bytes); with it, the token, and the text after it gets a
  // space prefix again, as after the start of the text.
  const std::vector<Token> plain = t->encode("<s>a", false, false);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(t->encode("<s>a", false, true), (std::vector<Token>{1, kFirstPiece + 2}));
  EXPECT_EQ(t->encode("a<s>a", false, true), (std::vector<Token>{kFirstPiece + 2, 1, kFirstPiece + 2}));
  v.add_space_prefix = false;
  auto no_prefix = detail::make_spm_tokenizer(v);
  EXPECT_EQ(no_prefix->encode("a", false), (std::vector<Token>{kFirstPiece + 1}));
  EXPECT_EQ(no_prefix->decode({kFirstPiece + 2}), " a");  // nothing to strip
}

// Byte-level BPE with single-symbol tokens for a, b, c and merges given in rank order.
std::unique_ptr<Tokenizer> tiny_bpe(const std::vector<std::string>& merges) {
  Vocab v;
  for (const char* t : {"a", "b", "c", "ab", "bc", "\xC4\xA0",
                        "\xC4\xA0"
                        "a",
                        "<|end|>"})
    v.text.push_back(t);
  v.type.assign(v.text.size(), TokenType::Normal);
  v.type.back() = TokenType::Control;
  v.eos = 7;
  return detail::make_bpe_tokenizer(std::move(v), merges, PreTokenizer::from_name("gpt-2"));
}

TEST(Bpe, LowestRankMergesFirst) {
  EXPECT_EQ(tiny_bpe({"b c", "a b"})->encode("abc", false), (std::vector<Token>{0, 4}));
  EXPECT_EQ(tiny_bpe({"a b", "b c"})->encode("abc", false), (std::vector<Token>{3, 2}));
  // " a" is a separate word; space maps to Ġ (token 5), merged with "a" by "Ġ a".
  auto t = tiny_bpe({"a b", "\xC4\xA0 a"});
  EXPECT_EQ(t->encode("ab a", false), (std::vector<Token>{3, 6}));
  EXPECT_EQ(t->decode({3, 6}), "ab a");
  EXPECT_TRUE(t->is_eog(7));  // eos, and "<|end|>" is a known end-of-turn text
  EXPECT_FALSE(t->is_eog(3));
  EXPECT_EQ(t->encode("a<|end|>", false, true), (std::vector<Token>{0, 7}));
  EXPECT_EQ(t->piece(7), "");
  EXPECT_EQ(t->piece(7, true), "<|end|>");
}

// gpt-oss's vocabulary, as llama.cpp treats it: the tokens framing a harmony message are text a
// reply keeps (its parser reads the channels), and <|end|> ends a message, not the generation.
TEST(Bpe, HarmonyFramingTokensAreKeptAndEndIsNotTheEnd) {
  Vocab v;
  for (const char* t : {"a", "b", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"})
    v.text.push_back(t);
  v.type.assign(v.text.size(), TokenType::Control);
  v.type[0] = v.type[1] = TokenType::Normal;
  v.eos = 6;
  auto t = detail::make_bpe_tokenizer(v, {}, PreTokenizer::from_name("gpt-2"));
  EXPECT_EQ(t->piece(2), "<|start|>");
  EXPECT_EQ(t->piece(3), "<|channel|>");
  EXPECT_EQ(t->piece(4), "<|message|>");
  EXPECT_EQ(t->piece(5), "<|end|>");  // a forced call's grammar writes it after an analysis message
  EXPECT_FALSE(t->is_eog(5));
  EXPECT_TRUE(t->is_eog(6));
  EXPECT_TRUE(t->is_eog(7));
  EXPECT_EQ(t->encode("a<|channel|>b", false), (std::vector<Token>{0, 3, 1}));
  // Without <|call|> (Phi-3's <|end|>), nothing changes.
  v.text.back() = "<|other|>";
  t = detail::make_bpe_tokenizer(v, {}, PreTokenizer::from_name("gpt-2"));
  EXPECT_TRUE(t->is_eog(5));
  EXPECT_EQ(t->piece(3), "");
  EXPECT_EQ(t->piece(5), "");
}

// DeepSeek's tool-call markers are control tokens in its files; a reply keeps them as text (its
// parser and a forced call's grammar read them), and only in a vocabulary that has them.
TEST(Bpe, DeepSeekToolCallMarkersAreKept) {
  Vocab v;
  for (const char* t : {"a", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
                        "<｜tool▁calls▁end｜>", "<｜end▁of▁sentence｜>"})
    v.text.push_back(t);
  v.type.assign(v.text.size(), TokenType::Control);
  v.type[0] = TokenType::Normal;
  v.eos = 6;
  auto t = detail::make_bpe_tokenizer(v, {}, PreTokenizer::from_name("gpt-2"));
  for (Token id = 1; id <= 5; ++id) EXPECT_EQ(t->piece(id), v.text[id]);
  EXPECT_EQ(t->piece(6), "");  // the end of the reply stays a control token
  EXPECT_EQ(t->encode("a<｜tool▁sep｜>a", false), (std::vector<Token>{0, 3, 0}));
  v.text[1] = "<｜other｜>";
  t = detail::make_bpe_tokenizer(v, {}, PreTokenizer::from_name("gpt-2"));
  EXPECT_EQ(t->piece(3), "");
}

TEST(Bpe, IgnoreMergesTakesWholeWordTokens) {
  // Llama 3: a word that is itself a token is emitted whole, even with no merge path to it.
  auto make = [](bool ignore_merges) {
    Vocab v;
    v.text = {"a", "b", "c", "abc"};
    // llama-bpe takes whole-word tokens first; dbrx has the same split without.
    return detail::make_bpe_tokenizer(std::move(v), {}, PreTokenizer::from_name(ignore_merges ? "llama-bpe" : "dbrx"));
  };
  EXPECT_EQ(make(true)->encode("abc", false), (std::vector<Token>{3}));
  EXPECT_EQ(make(false)->encode("abc", false), (std::vector<Token>{0, 1, 2}));
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's test vectors

struct Case {
  std::string text;
  std::vector<Token> ids;
};

// As test-tokenizer-0.cpp: cases end at "\n__ggml_vocab_test__\n" (so the newline before the
// marker is not part of the case); one line of ids per case in .out.
std::vector<Case> read_cases(const std::string& base) {
  std::string inp = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos; (pos = inp.find(sep)) != std::string::npos; inp.erase(0, pos + sep.size())) {
    cases.push_back({inp.substr(0, pos), {}});
  }
  std::ifstream out(base + ".out");
  std::string line;
  size_t i = 0;
  while (std::getline(out, line)) {
    if (i >= cases.size()) throw std::runtime_error("more .out lines than cases in " + base);
    std::istringstream ss(line);
    for (Token id; ss >> id;) cases[i].ids.push_back(id);
    ++i;
  }
  if (i != cases.size()) throw std::runtime_error("fewer .out lines than cases in " + base);
  return cases;
}

void check_vectors(const std::string& name, size_t want_cases) {
  const std::string base = kVocabDir + name;
  const auto tok = load(base);
  const auto cases = read_cases(base);
  ASSERT_EQ(cases.size(), want_cases);
  size_t n_expected = 0, n_nonempty = 0, failures = 0;
  for (const Case& c : cases) {
    n_expected += c.ids.size();
    n_nonempty += !c.ids.empty();
    const std::vector<Token> got = tok->encode(c.text, false, false);
    if (got != c.ids) ++failures;
    EXPECT_EQ(got, c.ids) << "text: '" << c.text << "'";
    EXPECT_EQ(tok->decode(got), c.text) << "round trip";
  }
  EXPECT_GT(n_expected, 400u);  // the vectors were read, not all empty
  EXPECT_GT(n_nonempty, 40u);
  EXPECT_EQ(failures, 0u);
}

TEST(Vectors, LlamaSpm) { check_vectors("ggml-vocab-llama-spm.gguf", 46); }
TEST(Vectors, Gpt2) { check_vectors("ggml-vocab-gpt-2.gguf", 46); }
TEST(Vectors, DeepseekCoder) { check_vectors("ggml-vocab-deepseek-coder.gguf", 46); }
TEST(Vectors, Refact) { check_vectors("ggml-vocab-refact.gguf", 46); }

// Byte-level BPE and SPM with byte fallback are lossless, even on invalid UTF-8.
TEST(Vectors, RandomBytesRoundTrip) {
  std::mt19937 rng(1234);
  // Mostly ASCII letters and spaces, some high bytes so that invalid sequences occur.
  const std::string alphabet = std::string("abc XYZ 019\n\t'!,") + "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x80\xFF";
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    const auto tok = load(kVocabDir + name);
    std::set<size_t> lengths;
    for (int trial = 0; trial < 50; ++trial) {
      std::string text(rng() % 64, ' ');
      for (char& c : text) c = alphabet[rng() % alphabet.size()];
      const std::vector<Token> ids = tok->encode(text, false);
      lengths.insert(ids.size());
      for (Token id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
      ASSERT_EQ(tok->decode(ids), text) << name << " trial " << trial;
    }
    EXPECT_GT(lengths.size(), 10u);  // the inputs vary
  }
}

TEST(Vocab, LlamaSpmSpecials) {
  const auto t = load(kVocabDir + "ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(t->n_vocab(), 32000);
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_FALSE(t->is_eog(1));
  EXPECT_FALSE(t->is_eog(15043));
  // add_bos_token true, add_eos_token false; 15043 = "▁Hello", 3186 = "▁world".
  EXPECT_EQ(t->encode("Hello world", true), (std::vector<Token>{1, 15043, 3186}));
  EXPECT_EQ(t->encode("", true), (std::vector<Token>{1}));
  EXPECT_EQ(t->encode("", false), (std::vector<Token>{}));
  EXPECT_EQ(t->encode("<s>Hello</s>", false, true), (std::vector<Token>{1, 15043, 2}));
  EXPECT_NE(t->encode("<s>Hello", false, false).front(), 1);
  EXPECT_EQ(t->piece(15043), " Hello");
  EXPECT_EQ(t->piece(13), "\n");  // <0x0A>
  EXPECT_EQ(t->piece(2), "");
  EXPECT_EQ(t->piece(2, true), "</s>");
  EXPECT_EQ(t->decode({1, 15043, 3186, 2}), "Hello world");
}

TEST(Vocab, Gpt2Specials) {
  const auto t = load(kVocabDir + "ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(t->n_vocab(), 50257);
  EXPECT_EQ(t->bos(), 50256);
  EXPECT_EQ(t->eos(), 50256);
  EXPECT_TRUE(t->is_eog(50256));
  // No add_bos_token key: a gpt2 vocabulary adds nothing. 15496 = "Hello", 995 = "Ġworld".
  EXPECT_EQ(t->encode("Hello world", true), (std::vector<Token>{15496, 995}));
  EXPECT_EQ(t->encode("Hello<|endoftext|>", false, true), (std::vector<Token>{15496, 50256}));
  EXPECT_GT(t->encode("Hello<|endoftext|>", false, false).size(), 2u);
  EXPECT_EQ(t->piece(995), " world");
  EXPECT_EQ(t->piece(50256), "");
  EXPECT_EQ(t->piece(50256, true), "<|endoftext|>");
}

TEST(Vocab, Stories260K) {
  const auto t = load(kShared + "/models/stories260K.gguf");
  EXPECT_EQ(t->n_vocab(), 512);
  const std::vector<Token> ids = t->encode("Once upon a time", true);
  EXPECT_EQ(ids, (std::vector<Token>{1, 403, 407, 261, 378}));
  EXPECT_EQ(t->decode(ids), "Once upon a time");
  const std::string story = "Lily saw a big, red ball.\nShe wanted to play with it!";
  EXPECT_EQ(t->decode(t->encode(story, true)), story);
}

// ---------------------------------------------------------------------------------------------
// Loading from GGUF metadata

std::unique_ptr<Tokenizer> from_writer(const gguf::Writer& w) {
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto file = gguf::File::parse(bytes.data(), bytes.size(), "test");
  return Tokenizer::from_gguf(*file);
}

TEST(FromGguf, NoVocabRefusesText) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.vocab_size", 77);
  w.set_string("tokenizer.ggml.model", "no_vocab");
  const auto t = from_writer(w);
  EXPECT_EQ(t->n_vocab(), 77);
  EXPECT_EQ(t->bos(), -1);
  try {
    t->encode("hi", true);
    FAIL() << "encode must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this model has no vocabulary; pass token ids"), std::string::npos);
  }
}

// Each key is set once: a duplicate key would be an error of its own and hide the one tested.
gguf::Writer tiny_spm_writer(const std::string& model = "llama", const std::vector<int32_t>& types = {2, 3, 3, 1}) {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", model);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                               "\xE2\x96\x81"
                                               "a"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1});
  w.set_i32_array("tokenizer.ggml.token_type", types);
  return w;
}

TEST(FromGguf, SpmDefaultsAndOverrides) {
  gguf::Writer w = tiny_spm_writer();
  w.set_u32("tokenizer.ggml.padding_token_id", 4294967295u);  // as stories260K: ignored
  auto t = from_writer(w);
  EXPECT_EQ(t->encode("a", true), (std::vector<Token>{1, 3}));  // add_bos defaults to true
  EXPECT_EQ(t->eos(), 2);

  gguf::Writer w2 = tiny_spm_writer();
  w2.set_bool("tokenizer.ggml.add_bos_token", false);
  w2.set_bool("tokenizer.ggml.add_eos_token", true);
  w2.set_u32("tokenizer.ggml.eos_token_id", 1);
  w2.set_u32("tokenizer.ggml.bos_token_id", 99);  // out of range: keeps the default 1
  t = from_writer(w2);
  EXPECT_EQ(t->encode("a", true), (std::vector<Token>{3, 1}));
  EXPECT_EQ(t->bos(), 1);
  EXPECT_TRUE(t->is_eog(1));
}

TEST(FromGguf, BadMetadataIsAnError) {
  EXPECT_NO_THROW(from_writer(tiny_spm_writer()));
  EXPECT_ERROR(from_writer(tiny_spm_writer("llama", {2, 3, 3})),
               "token_type has 3 entries for 4 tokens");                                         // one type short
  EXPECT_ERROR(from_writer(tiny_spm_writer("llama", {2, 3, 3, 9})), "= 9 is not a token type");  // no such type
  EXPECT_ERROR(from_writer(tiny_spm_writer("bert")), "'bert' is not supported");                 // unsupported kind
  EXPECT_ERROR(from_writer(tiny_spm_writer("gpt2")),
               "gpt2 tokenizer without tokenizer.ggml.merges");  // gpt2 without merges
}

// A byte-level BPE file naming its pre-tokenizer: the name decides BOS defaults, and an unknown
// name is an error (it used to fall back to GPT-2's split silently).
TEST(FromGguf, PreTokenizerNameDecides) {
  auto bpe = [](const std::string& pre) {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 3);
    return w;
  };
  EXPECT_EQ(from_writer(bpe("llama-bpe"))->encode("ab", true), (std::vector<Token>{3, 2}));  // adds BOS
  EXPECT_EQ(from_writer(bpe("qwen2"))->encode("ab", true), (std::vector<Token>{2}));
  EXPECT_EQ(from_writer(bpe(""))->encode("ab", true), (std::vector<Token>{2}));  // llama.cpp's "default"
  EXPECT_ERROR(from_writer(bpe("qwen-9000")), "unknown pre-tokenizer 'qwen-9000'");
  EXPECT_ERROR(from_writer(bpe("gemma4")), "'gemma4' is SPM-style BPE");
}

}  // namespace
}  // namespace weft::tokenizer
