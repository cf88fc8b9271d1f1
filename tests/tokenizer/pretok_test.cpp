// Pre-tokenizers: hand-worked splits of the GPT-2 / Llama 3 / Qwen2 families, splits of every
// regex family computed by an independent model of llama.cpp's splitting on Python's regex engine
// (scripts/gen_pretok_cases.py), hand-worked Kimi-K2 and AFMoE splits, the hand-written splits
// against the regexes they stand for, and the name table.
#include "tokenizer/tokenizer_pretok.h"

#include "core/error.h"
#include "support/expect_error.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer_pretok_custom.h"
#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace weft::tokenizer {
namespace {

using detail::PreTokenizer;

// Words of `text` under the pre-tokenizer `name`, checked to tile the text.
std::vector<std::string> split(std::string_view name, const std::string& text) {
  std::vector<std::string> out;
  std::string joined;
  for (std::string_view w : PreTokenizer::from_name(name).split(text)) {
    out.emplace_back(w);
    joined += w;
  }
  EXPECT_EQ(joined, text) << "words must tile the text";
  return out;
}

using Words = std::vector<std::string>;

Words words_of(std::initializer_list<std::string_view> w) { return Words(w.begin(), w.end()); }

TEST(PreTokenize, Gpt2) {
  const std::string_view k = "gpt-2";
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "   Hello"), (Words{"  ", " Hello"}));  // \s+(?!\S) leaves one space
  EXPECT_EQ(split(k, "a \n b"), (Words{"a", " \n", " b"}));
  EXPECT_EQ(split(k, "\n\nHi"), (Words{"\n", "\n", "Hi"}));  // one char: \s+(?!\S) fails, \s+ takes it
  EXPECT_EQ(split(k, "end  "), (Words{"end", "  "}));
  EXPECT_EQ(split(k, "I'm you'LL"), (Words{"I", "'m", " you", "'", "LL"}));  // lower case only
  EXPECT_EQ(split(k, "abc123 4567!!? x"), (Words{"abc", "123", " 4567", "!!?", " x"}));
  EXPECT_EQ(split(k, "Führer ½"), (Words{"Führer", " ½"}));
  EXPECT_EQ(split(k, "нещо на"), (Words{"нещо", " на"}));
  EXPECT_EQ(split(k, ""), Words{});
}

TEST(PreTokenize, Llama3) {
  const std::string_view k = "llama-bpe";
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "12345678"), (Words{"123", "456", "78"}));
  EXPECT_EQ(split(k, "I'M you'LL"), (Words{"I", "'M", " you", "'LL"}));  // any case
  EXPECT_EQ(split(k, "!abc"), (Words{"!abc"}));                          // one non-letter may lead a word
  EXPECT_EQ(split(k, "x?!\n\ny"), (Words{"x", "?!\n\n", "y"}));          // punctuation takes newlines
  EXPECT_EQ(split(k, "\n\n  x"), (Words{"\n\n", " ", " x"}));
  EXPECT_EQ(split(k, "a \n\t b"), (Words{"a", " \n", "\t", " b"}));
  EXPECT_EQ(split(k, "\nabc"), (Words{"\n", "abc"}));  // \r\n may not lead a word
}

TEST(PreTokenize, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(split("qwen2", "a1234"), (Words{"a", "1", "2", "3", "4"}));
  EXPECT_EQ(split("qwen2", "I'M"), (Words{"I", "'M"}));
}

// Random strings over letters, digits, marks, ZWJ, NBSP, U+2028, \v, NEL, CR/LF and punctuation,
// split by Python's `regex` module (regex.findall with each pattern written in tokenizer_pretok.h);
// an independent engine with backtracking, so these check the hand-written matchers.
TEST(PreTokenize, MatchesPythonRegexModule) {
  // Constant data, not strings built at run time: the tables compile in a fraction of the time.
  struct Split {
    std::string_view kind;
    std::string_view text;
    std::initializer_list<std::string_view> words;
  };
  static const Split cases[] = {
      {"gpt-2",
       "\xC2\xA0.,\xD0\xB6\xE2\x82\xACvE\xD0\xB6\xC3\xA9\xE2\x80\x8D\xCC\x81"
       "El",
       {"\xC2\xA0", ".,", "\xD0\xB6", "\xE2\x82\xAC", "vE\xD0\xB6\xC3\xA9", "\xE2\x80\x8D\xCC\x81", "El"}},
      {"gpt-2",
       " RT\xD9\xA3\xE2\x80\x8Ds\xF0\x9F\xA6\x99\n,\xE2\x80\xA8\xCC\x81\xE2\x80\xA8"
       "e",
       {" RT", "\xD9\xA3", "\xE2\x80\x8D", "s", "\xF0\x9F\xA6\x99", "\n", ",", "\xE2\x80\xA8", "\xCC\x81",
        "\xE2\x80\xA8", "e"}},
      {"gpt-2",
       "a\xC2\xBDtSsvM\xF0\x9F\xA6\x99Z.9,\xE2\x82\xACv",
       {"a", "\xC2\xBD", "tSsvM", "\xF0\x9F\xA6\x99", "Z", ".", "9", ",\xE2\x82\xAC", "v"}},
      {"gpt-2",
       "m\xE2\x80\x8D"
       "1\xE4\xB8\xAD"
       "a\x0BT.\xE2\x80\xA8"
       "D\r\xC2\xA0Td",
       {"m", "\xE2\x80\x8D", "1",
        "\xE4\xB8\xAD"
        "a",
        "\x0B", "T", ".", "\xE2\x80\xA8", "D", "\r", "\xC2\xA0", "Td"}},
      {"gpt-2",
       "m\xD0\xB6"
       "1Zt\xE3\x80\x80l\nl1\tt",
       {"m\xD0\xB6", "1", "Zt", "\xE3\x80\x80", "l", "\n", "l", "1", "\t", "t"}},
      {"gpt-2",
       "\xC2\x85"
       "aVVS\xC3\xA9\t\n\rt",
       {"\xC2\x85", "aVVS\xC3\xA9", "\t\n", "\r", "t"}},
      {"llama-bpe",
       "\xE2\x80\x8Dv\xC2\x85"
       "D'T 'a\rLrMl",
       {"\xE2\x80\x8Dv",
        "\xC2\x85"
        "D",
        "'T", " '", "a", "\r", "LrMl"}},
      {"llama-bpe",
       "S.\xE4\xB8\xAD"
       "E\xC2\x85\xC2\xA0v,\xD0\xB6v",
       {"S",
        ".\xE4\xB8\xAD"
        "E",
        "\xC2\x85", "\xC2\xA0v", ",\xD0\xB6v"}},
      {"llama-bpe",
       "r\r\xE2\x80\xA8\tL\n\rVaD\xE2\x82\xAC ZVE",
       {"r", "\r", "\xE2\x80\xA8", "\tL", "\n\r", "VaD", "\xE2\x82\xAC", " ZVE"}},
      {"llama-bpe",
       "\xF0\x9F\xA6\x99\xE2\x80\xA8\xE3\x80\x80lsRV,da\xCC\x81'1",
       {"\xF0\x9F\xA6\x99", "\xE2\x80\xA8", "\xE3\x80\x80lsRV", ",da", "\xCC\x81'", "1"}},
      {"llama-bpe",
       "ttTV\xE2\x82\xAC\xE2\x80\x8DMa\xF0\x9F\xA6\x99  \xCC\x81.",
       {"ttTV", "\xE2\x82\xAC\xE2\x80\x8D", "Ma", "\xF0\x9F\xA6\x99", " ", " \xCC\x81."}},
      {"llama-bpe",
       "\xE2\x82\xAC\xC3\xA9\xE3\x80\x80r\tE\xE2\x80\x8DR m\xCC\x81",
       {"\xE2\x82\xAC\xC3\xA9", "\xE3\x80\x80r", "\tE", "\xE2\x80\x8DR", " m", "\xCC\x81"}},
      {"qwen2",
       "ve\xE2\x80\x8D\xC2\xA0v\xC2\x85\t\xC3\xA9\xF0\x9F\xA6\x99T\r",
       {"ve", "\xE2\x80\x8D", "\xC2\xA0v", "\xC2\x85", "\t\xC3\xA9", "\xF0\x9F\xA6\x99T", "\r"}},
      {"qwen2",
       "lls\xD0\xB6"
       "dM\nd\r\xF0\x9F\xA6\x99",
       {"lls\xD0\xB6"
        "dM",
        "\n", "d", "\r", "\xF0\x9F\xA6\x99"}},
      {"qwen2",
       "1\xC2\xBD"
       "Etrm\xC3\xA9\xC2\xA0\xE2\x80\xA8\xCC\x81\xCC\x81tD",
       {"1", "\xC2\xBD", "Etrm\xC3\xA9", "\xC2\xA0", "\xE2\x80\xA8", "\xCC\x81\xCC\x81", "tD"}},
      {"qwen2",
       "\xC2\xBD\xE3\x80\x80rT r,'\x0B\xC2\xBD\xE2\x82\xACr",
       {"\xC2\xBD", "\xE3\x80\x80rT", " r", ",'", "\x0B", "\xC2\xBD", "\xE2\x82\xACr"}},
      {"qwen2",
       "sZ\xC3\xA9  sZ\xF0\x9F\xA6\x99\xE2\x80\x8Dt\xC3\xA9t 9",
       {"sZ\xC3\xA9", " ", " sZ", "\xF0\x9F\xA6\x99\xE2\x80\x8D", "t\xC3\xA9t", " ", "9"}},
      {"qwen2", "tt,\xD9\xA3 sr' T\xC2\x85", {"tt", ",", "\xD9\xA3", " sr", "'", " T", "\xC2\x85"}},
  };
  for (const Split& c : cases) EXPECT_EQ(split(c.kind, std::string(c.text)), words_of(c.words)) << c.text;
}

struct FamilyCase {
  const char* pre;
  const char* text;
  std::initializer_list<std::string_view> words;
};

// Every regex family on texts with digits, punctuation, CJK, Greek, marks, whitespace runs.
TEST(PreTokenize, EveryRegexFamilyMatchesPythonModelOfLlamaCpp) {
  static const FamilyCase cases[] = {
#include "pretok_cases.inc"
  };
  ASSERT_GT(std::size(cases), 250u);  // the generated table was included, not an empty stub
  std::set<std::string> families;
  for (const FamilyCase& c : cases) {
    families.insert(PreTokenizer::from_name(c.pre).type());
    EXPECT_EQ(split(c.pre, c.text), words_of(c.words)) << c.pre << ": " << c.text;
  }
  EXPECT_GE(families.size(), 28u);
}

TEST(PreTokenize, FamiliesSplitDigitsTheirOwnWay) {
  const std::string t = "x1234567";
  EXPECT_EQ(split("gpt-2", t), (Words{"x", "1234567"}));
  EXPECT_EQ(split("llama-bpe", t), (Words{"x", "123", "456", "7"}));
  EXPECT_EQ(split("qwen2", t), (Words{"x", "1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split("refact", t), (Words{"x", "1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split("default", t), (Words{"x", "123", "456", "7"}));
  EXPECT_EQ(split("superbpe", t), (Words{"x", "1", "234", "567"}));  // threes from the right
  EXPECT_EQ(split("tiny_aya", t), (Words{"x", "1", "234", "567"}));
  EXPECT_EQ(split("afmoe", t), (Words{"x", "1", "234", "567"}));
  EXPECT_EQ(split("deepseek-v3", t), (Words{"x", "123", "456", "7"}));
}

TEST(PreTokenize, KimiK2) {
  const std::string_view k = "kimi-k2";
  // Han runs are words of their own; other letters form words with one leading non-letter and
  // keep a contraction (any case); digits go by three.
  EXPECT_EQ(split(k, "Hello中文world"), (Words{"Hello", "中文", "world"}));
  EXPECT_EQ(split(k, "it's THEY'RE x'y"), (Words{"it's", " THEY'RE", " x", "'y"}));
  EXPECT_EQ(split(k, " 中文 日本語ok"), (Words{" ", "中文", " ", "日本語", "ok"}));
  EXPECT_EQ(split(k, "日本語のテスト"), (Words{"日本語", "のテスト"}));  // kana are letters, not Han
  EXPECT_EQ(split(k, "1234567!?\n\nx"), (Words{"123", "456", "7", "!?\n\n", "x"}));
  EXPECT_EQ(split(k, "a  \n b"), (Words{"a", "  \n", " b"}));
}

TEST(PreTokenize, AfmoeDigitsThenCjkThenWords) {
  const std::string_view k = "afmoe";
  EXPECT_EQ(split(k, "ab12345cd"), (Words{"ab", "12", "345", "cd"}));
  EXPECT_EQ(split(k, "123456"), (Words{"123", "456"}));
  EXPECT_EQ(split(k, "日本語のテストabc"), (Words{"日本語のテスト", "abc"}));
  EXPECT_EQ(split(k, "한국어 ok"), (Words{"한국어", " ok"}));
  EXPECT_EQ(split(k, "-x !!\n"), (Words{"-x", " !!\n"}));
}

// llama.cpp runs the GPT-2 and Llama 3 patterns as hand-written code; they must split exactly as
// the regexes, which weft's engine runs here, on random texts of every class the patterns read.
TEST(PreTokenize, HandWrittenSplitsEqualTheirRegexes) {
  const std::vector<std::string> alphabet = {
      "a", "Z", "é", "ж", "中", "1", "٣", "½", " ",    " ", "\t",       "\n",           "\r",
      ",", "'", "s", "S", "L",  "l", "e", "!", "🦙", "́",  "\xC2\xA0", "\xE2\x80\xA8", "\xC2\x85"};
  std::mt19937 rng(7);
  for (detail::CustomSplit which : {detail::CustomSplit::Gpt2, detail::CustomSplit::Llama3}) {
    const detail::SplitRegex rx(detail::custom_split_pattern(which));
    size_t n_words = 0;
    for (int trial = 0; trial < 400; ++trial) {
      std::string text;
      for (int n = static_cast<int>(rng() % 24); n > 0; --n) text += alphabet[rng() % alphabet.size()];
      const auto decoded = unicode::decode_utf8(text);
      std::vector<uint32_t> cps;
      for (const auto& c : decoded) cps.push_back(c.cp);
      std::vector<detail::Span> by_hand, by_regex;
      if (cps.empty()) continue;
      detail::custom_split(which, detail::ClassifiedText(cps), {0, cps.size()}, by_hand);
      rx.split(detail::regex_units(rx.reads(), cps), {0, cps.size()}, by_regex);
      ASSERT_EQ(by_hand.size(), by_regex.size()) << text;
      for (size_t i = 0; i < by_hand.size(); ++i) {
        ASSERT_EQ(by_hand[i].begin, by_regex[i].begin) << text;
        ASSERT_EQ(by_hand[i].end, by_regex[i].end) << text;
      }
      n_words += by_hand.size();
    }
    EXPECT_GT(n_words, 2000u);  // the texts were split, not empty
  }
}

TEST(PreTokenize, LongRunsNeitherOverflowNorStall) {
  // Runs of one class are matched without recursion per character (sanitizer builds have small
  // stacks); 200k characters of each through the patterns with loops and lookaheads. (SuperBPE's
  // and Tiny Aya's digit lookaheads scan to the end of a digit run at every digit, quadratic as
  // in std::regex, so they get letters and spaces only.)
  const std::string letters(200000, 'a'), spaces(200000, ' '), digits(200000, '7');
  for (const char* pre : {"gpt-4o", "tekken", "exaone-moe", "qwen2", "superbpe", "tiny_aya", "deepseek-llm", "bloom"}) {
    for (const std::string* s : {&letters, &spaces, &digits}) {
      if (s == &digits && (std::string_view(pre) == "superbpe" || std::string_view(pre) == "tiny_aya")) continue;
      const std::vector<std::string_view> words = PreTokenizer::from_name(pre).split(*s + "x" + *s);
      size_t n = 0;
      for (std::string_view w : words) n += w.size();
      EXPECT_EQ(n, 2 * s->size() + 1) << pre;
    }
  }
}

TEST(PreTokenize, NamesFromGguf) {
  EXPECT_EQ(PreTokenizer::from_name("gpt-2").type(), "gpt2");
  EXPECT_EQ(PreTokenizer::from_name("default").type(), "default");  // not GPT-2: four regexes
  EXPECT_EQ(PreTokenizer::from_name("llama-bpe").type(), "llama3");
  EXPECT_EQ(PreTokenizer::from_name("qwen2").type(), "qwen2");
  EXPECT_EQ(PreTokenizer::from_name("megrez").type(), "qwen2");
  EXPECT_EQ(PreTokenizer::from_name("refact").type(), "starcoder");
  EXPECT_EQ(PreTokenizer::from_name("hunyuan-dense").type(), "deepseek3-llm");
  for (const char* name : {"default",
                           "llama3",
                           "llama-bpe",
                           "deepseek-llm",
                           "deepseek-coder",
                           "deepseek-v3",
                           "falcon",
                           "mpt",
                           "starcoder",
                           "gpt-2",
                           "refact",
                           "command-r",
                           "qwen2",
                           "stablelm2",
                           "olmo",
                           "dbrx",
                           "smaug-bpe",
                           "poro-chat",
                           "chatglm-bpe",
                           "viking",
                           "jais",
                           "tekken",
                           "smollm",
                           "codeshell",
                           "bloom",
                           "gpt3-finnish",
                           "exaone",
                           "chameleon",
                           "minerva-7b",
                           "megrez",
                           "gpt-4o",
                           "superbpe",
                           "trillion",
                           "bailingmoe",
                           "seed-coder",
                           "kimi-k2",
                           "grok-2",
                           "hunyuan",
                           "hunyuan-dense",
                           "llama4",
                           "pixtral",
                           "falcon3",
                           "deepseek-r1-qwen",
                           "exaone4",
                           "glm4",
                           "minimax-m2",
                           "tiny_aya",
                           "afmoe",
                           "laguna",
                           "exaone-moe",
                           "minicpm5",
                           "qwen35",
                           "youtu",
                           "jais-2",
                           "spark2_5",
                           "ufakzeka",
                           "granite-embed-multi-97m",
                           "mellum2",
                           "solar-open"}) {
    EXPECT_EQ(PreTokenizer::from_name(name).name(), name);
  }
  EXPECT_ERROR(PreTokenizer::from_name("starcoder-9000"), "unknown pre-tokenizer 'starcoder-9000'");
  EXPECT_ERROR(PreTokenizer::from_name(""), "unknown pre-tokenizer ''");
  EXPECT_ERROR(PreTokenizer::from_name("gemma4"), "'gemma4' is SPM-style BPE");
}

TEST(PreTokenize, FlagsFollowLlamaCpp) {
  const auto llama3 = PreTokenizer::from_name("llama-bpe").flags();
  EXPECT_TRUE(llama3.ignore_merges && llama3.add_bos && !llama3.no_bos);
  const auto dbrx = PreTokenizer::from_name("dbrx").flags();  // Llama 3's split, none of its flags
  EXPECT_FALSE(dbrx.ignore_merges || dbrx.add_bos || dbrx.no_bos);
  EXPECT_TRUE(PreTokenizer::from_name("chatglm-bpe").flags().no_bos);
  EXPECT_TRUE(PreTokenizer::from_name("tekken").flags().add_bos);
  EXPECT_TRUE(PreTokenizer::from_name("chameleon").flags().add_bos);
  EXPECT_TRUE(PreTokenizer::from_name("minicpm5").flags().ignore_merges);
  EXPECT_FALSE(PreTokenizer::from_name("qwen2").flags().ignore_merges);
}

}  // namespace
}  // namespace weft::tokenizer
