#include "tokenizer/tokenizer_pretok.h"

#include "core/error.h"
#include "tokenizer/split_regex.h"
#include "tokenizer/tokenizer_pretok_custom.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

namespace weft::tokenizer::detail {

struct PreTokenizer::Step {
  std::optional<CustomSplit> custom;
  std::optional<SplitRegex> regex;
};

namespace {

// One of llama.cpp's pre-tokenizer types: the tokenizer.ggml.pre names that select it, its
// regexes in order (llm_tokenizer_bpe's constructor) and what else the names set (load()).
struct Family {
  std::string_view type;
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  PreTokenizerFlags flags;
};

// Llama 3's pattern (llama.cpp's, its (?i:) written out) with \p{N} for \p{N}{1,3}: one digit per word.
constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kBloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";
// GPT-4o: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] written as "a letter not a-z", \p{Ll}.. as "not A-Z".
constexpr std::string_view kGpt4oWords =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::vector<Family>& families() {
  // GPT-2's pattern ends many lists; DBRX, Smaug and ChatGLM 4 use Llama 3's.
  const std::string_view kGpt2 = custom_split_pattern(CustomSplit::Gpt2);
  const std::string_view kLlama3 = custom_split_pattern(CustomSplit::Llama3);
  static const std::vector<Family> k =
      {
          {"default", {"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
          {"llama3",
           {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
           {kLlama3},
           {.ignore_merges = true, .add_bos = true}},
          {"dbrx", {"dbrx", "smaug-bpe"}, {kLlama3}},
          {"chatglm4", {"glm4", "chatglm-bpe"}, {kLlama3}, {.no_bos = true}},
          {"jais2",
           {"jais-2"},
           {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"}},
          {"deepseek-llm",
           {"deepseek-llm"},
           {"[\r\n]",
            R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌῐ-\u1FD3ῖ-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
            R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N}+)"}},
          {"deepseek-coder",
           {"deepseek-coder"},
           {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([一-龥ࠀ-一가-퟿]+)", R"(\p{N})"}},
          {"deepseek3-llm",
           {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
           {R"(\p{N}{1,3})", R"([一-龥぀-ゟ゠-ヿ]+)", kDeepseekV3Words}},
          {"spark2_5",
           {"spark2_5"},
           {R"(\p{N}{1,3})", R"([一-龥぀-ゟ゠-ヿ]+)",
            R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)re",
            R"(\p{N})"}},
          {"youtu",
           {"youtu"},
           {R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)",
            R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
           {.ignore_merges = true}},
          {"falcon", {"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
          {"starcoder",
           {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
           {R"(\p{N})", kGpt2}},
          {"gpt2",
           {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
            "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion",
            "granite-docling"},
           {kGpt2}},
          {"qwen2",
           {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"},
           {kQwen2}},
          {"qwen35",
           {"qwen35"},
           {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
          {"poro", {"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
          {"viking", {"viking"}, {kBloom, R"(\p{N})"}},
          {"tekken",
           {"tekken"},
           {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
           {.ignore_merges = true, .add_bos = true}},
          {"chameleon",
           {"chameleon"},
           {R"(<sentinel:[0-9]+>)", R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)", R"(([\t\n]|    |  ))", R"(\p{N})",
            R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
           {.add_bos = true}},
          {"gpt4o", {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4oWords}},
          {"granite-emb-multi",
           {"granite-embed-multi-97m"},
           {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
           {.ignore_merges = true}},
          {"tiny-aya",
           {"tiny_aya", "cohere2moe"},
           {R"(\d{1,3}(?=(?:\d{3})*\b))", R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
          {"kimi-k2", {"kimi-k2"}, {custom_split_pattern(CustomSplit::KimiK2)}},
          {"superbpe", {"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}},
          {"bailingmoe",
           {"bailingmoe", "bailingmoe2", "llada-moe"},
           {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"}},
          {"seed-coder",
           {"seed-coder"},
           {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
          {"ufakzeka",
           {"ufakzeka"},
           {R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
          {"grok-2", {"grok-2"}, {kQwen2}},
          {"afmoe",
           {"afmoe"},
           {custom_split_pattern(CustomSplit::AfmoeDigits),
            R"([一-鿿㐀-䶿\uF900-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+)",
            kDeepseekV3Words}},
          {"laguna", {"laguna"}, {R"([^\n]+|[\n]+)", kQwen2}},
          {"exaone-moe",
           {"exaone-moe"},
           {R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"}},
          {"minicpm5",
           {"minicpm5"},
           {R"(\p{N}{1,3})",
            R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
           {.ignore_merges = true}},
      };
  return k;
}

// Names llama.cpp knows whose tokenizers are SPM-style BPE over raw UTF-8 (spaces as U+2581, no
// byte symbols), which weft's byte-level BPE does not do.
constexpr std::string_view kNotByteLevel[] = {"gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"};

std::optional<CustomSplit> custom_for(std::string_view pattern) {
  for (CustomSplit c : {CustomSplit::Gpt2, CustomSplit::Llama3, CustomSplit::KimiK2, CustomSplit::AfmoeDigits}) {
    if (pattern == custom_split_pattern(c)) return c;
  }
  return std::nullopt;
}

// Compiled once per family and process (tokenizers are made per model load).
std::shared_ptr<const std::vector<PreTokenizer::Step>> steps_of(const Family& f) {
  static std::mutex mutex;
  static std::map<std::string_view, std::shared_ptr<const std::vector<PreTokenizer::Step>>> cache;
  const std::lock_guard lock(mutex);
  auto& slot = cache[f.type];
  if (!slot) {
    auto steps = std::make_shared<std::vector<PreTokenizer::Step>>();
    for (std::string_view pattern : f.regexes) {
      PreTokenizer::Step s;
      s.custom = custom_for(pattern);
      if (!s.custom) s.regex.emplace(pattern);
      steps->push_back(std::move(s));
    }
    slot = std::move(steps);
  }
  return slot;
}

}  // namespace

PreTokenizer PreTokenizer::from_name(std::string_view name) {
  for (const Family& f : families()) {
    if (std::find(f.names.begin(), f.names.end(), name) == f.names.end()) continue;
    PreTokenizer p;
    p.name_ = name;
    p.type_ = f.type;
    p.flags_ = f.flags;
    p.steps_ = steps_of(f);
    return p;
  }
  if (std::find(std::begin(kNotByteLevel), std::end(kNotByteLevel), name) != std::end(kNotByteLevel)) {
    fail("tokenizer", "pre-tokenizer '{}' is SPM-style BPE over raw UTF-8, which weft does not support", name);
  }
  fail("tokenizer", "unknown pre-tokenizer '{}' (tokenizer.ggml.pre); weft knows llama.cpp's names", name);
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  const std::vector<unicode::CodePoint> decoded = unicode::decode_utf8(text);
  std::vector<uint32_t> cps(decoded.size());
  for (size_t i = 0; i < decoded.size(); ++i) cps[i] = decoded[i].cp;

  // What each step reads, made when first needed.
  std::optional<ClassifiedText> classified;
  std::optional<std::vector<uint32_t>> units[2];

  std::vector<Span> pieces = {{0, cps.size()}}, next;
  if (cps.empty()) pieces.clear();
  for (const Step& step : *steps_) {
    next.clear();
    if (step.custom) {
      if (!classified) classified.emplace(cps);
      for (Span p : pieces) custom_split(*step.custom, *classified, p, next);
    } else {
      const RegexText kind = step.regex->reads();
      auto& u = units[static_cast<int>(kind)];
      if (!u) u = regex_units(kind, cps);
      for (Span p : pieces) step.regex->split(*u, p, next);
    }
    pieces.swap(next);
  }

  std::vector<std::string_view> words;
  words.reserve(pieces.size());
  for (Span p : pieces) {
    const size_t begin = decoded[p.begin].offset;
    const size_t end = p.end < decoded.size() ? decoded[p.end].offset : text.size();
    words.push_back(text.substr(begin, end - begin));
  }
  return words;
}

}  // namespace weft::tokenizer::detail
