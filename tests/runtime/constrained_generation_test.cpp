// Constrained generation on a generated model: random valid schemas whose outputs parse as JSON and
// validate (a small validator for the subset below), the same tokens under tensor splits as on one
// device, greedy and sampled, and a state no token continues ending in a clear error.
#include "device/worker_process.h"
#include "model/constrained_sampling.h"
#include "model/json_schema_grammar.h"
#include "runtime/generate.h"
#include "runtime/token_texts.h"
#include "support/expect_error.h"
#include "support/generated_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

namespace weft::runtime {
namespace {

using json = nlohmann::ordered_json;
using test_support::cpu_engine_options;
using test_support::GeneratedModel;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x} ", c);
  return out;
}

// Whether v is valid against s, for the keywords random_schema writes.
bool valid(const json& v, const json& s) {
  if (s.contains("anyOf")) {
    for (const json& a : s["anyOf"])
      if (valid(v, a)) return true;
    return false;
  }
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  const std::string t = s["type"];
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "integer")
    return v.is_number_integer() && v.get<int64_t>() >= s["minimum"].get<int64_t>() &&
           v.get<int64_t>() <= s["maximum"].get<int64_t>();
  if (t == "string") return v.is_string() && code_points(v.get<std::string>()) <= s["maxLength"].get<size_t>();
  if (t == "array") {
    if (!v.is_array() || v.size() > s["maxItems"].get<size_t>()) return false;
    for (const json& x : v)
      if (!valid(x, s["items"])) return false;
    return true;
  }
  if (t == "object") {
    if (!v.is_object() || v.size() != s["properties"].size()) return false;  // all required, no others
    for (const auto& [k, ps] : s["properties"].items())
      if (!v.contains(k) || !valid(v[k], ps)) return false;
    return true;
  }
  return false;
}

// A random schema whose every value is bounded (so a random model's output ends).
json random_schema(std::mt19937& g, int depth) {
  int kind = std::uniform_int_distribution<int>(0, depth > 1 ? 5 : 8)(g);
  switch (kind) {
    case 0: return {{"type", "boolean"}};
    case 1: return {{"type", "null"}};
    case 2: {
      int lo = std::uniform_int_distribution<int>(-50, 50)(g);
      return {{"type", "integer"}, {"minimum", lo}, {"maximum", lo + std::uniform_int_distribution<int>(0, 200)(g)}};
    }
    case 3: return {{"enum", json::array({"red", 7, nullptr, "green"})}};
    case 4: return {{"type", "string"}, {"maxLength", std::uniform_int_distribution<int>(0, 5)(g)}};
    case 5:
      return {{"anyOf", json::array({{{"type", "boolean"}}, {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}})}};
    case 6:
      return {{"type", "array"},
              {"items", random_schema(g, depth + 1)},
              {"maxItems", std::uniform_int_distribution<int>(0, 3)(g)}};
    default: {
      json o = {{"type", "object"},
                {"properties", json::object()},
                {"required", json::array()},
                {"additionalProperties", false}};
      int n = std::uniform_int_distribution<int>(1, 3)(g);
      for (int i = 0; i < n; ++i) {
        std::string k = std::string(1, static_cast<char>('a' + i)) + "k";
        o["properties"][k] = random_schema(g, depth + 1);
        o["required"].push_back(k);
      }
      return o;
    }
  }
}

GenerateResult run(const GeneratedModel& m, int n_devices, const json& schema, float temp, uint64_t seed) {
  Engine e(*m.file, cpu_engine_options(n_devices, 1, 512));
  model::SamplingParams p;
  p.temp = temp;
  p.seed = seed;
  auto grammar = model::Grammar::parse(model::json_schema_to_grammar(schema));
  auto prompt = m.tok->encode("{", true, false);
  return generate(e, m.tok.get(), prompt, 400, p, {}, grammar);
}

TEST(ConstrainedGeneration, RandomSchemasValidateAndSplitsAgree) {
  GeneratedModel m;
  std::mt19937 g(3);
  for (int i = 0; i < 6; ++i) {
    json schema = random_schema(g, 0);
    float temp = i % 2 ? 0.8f : 0.f;
    GenerateResult one = run(m, 1, schema, temp, 100 + i);
    ASSERT_EQ(one.stop, StopReason::EndOfGeneration) << schema.dump() << " gave " << one.text;
    json v;
    ASSERT_NO_THROW(v = json::parse(one.text)) << schema.dump() << " gave " << hex(one.text);
    EXPECT_TRUE(valid(v, schema)) << schema.dump() << " gave " << one.text;
    for (int n : {2, 3})
      EXPECT_EQ(run(m, n, schema, temp, 100 + i).generated, one.generated) << schema.dump() << " on " << n;
  }
}

// A grammar that allows one word the model ranks far below the devices' candidates: the coordinator
// takes the whole vocabulary, which every device rereads from the logits its step kept (one forward
// pass, not two), and chooses what one device's whole logits say, on tensor and layer splits and
// over a worker.
TEST(ConstrainedGeneration, TheWholeVocabularyFallbackRereadsTheStepsLogits) {
  GeneratedModel m;
  const std::vector<Token> prompt = {1, 2, 3};
  Engine whole(*m.file, cpu_engine_options(1, 1, 64));
  const std::vector<float> logits = whole.eval_logits(prompt);
  auto texts = token_texts(*m.tok);
  auto printable = [](const std::string& b) {
    return !b.empty() &&
           std::all_of(b.begin(), b.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  };
  Token word = -1;  // the lowest-ranked printable text token
  for (Token t = 0; t < static_cast<Token>(logits.size()); ++t)
    if (texts->kind[t] == model::TokenTexts::Kind::Text && printable(texts->bytes[t]) &&
        (word < 0 || logits[t] < logits[word]))
      word = t;
  ASSERT_GE(word, 0);
  const std::string target = texts->bytes[word];
  Token want = -1;  // greedy among what the grammar allows: the tokens that start the word
  for (Token t = 0; t < static_cast<Token>(logits.size()); ++t)
    if (texts->kind[t] == model::TokenTexts::Kind::Text && !texts->bytes[t].empty() &&
        target.starts_with(texts->bytes[t]) && (want < 0 || logits[t] > logits[want]))
      want = t;
  const auto rank = std::count_if(logits.begin(), logits.end(), [&](float l) { return l > logits[want]; });
  ASSERT_GE(rank, model::kConstrainedCandidates) << "the grammar's choice is among the candidates: no fallback";
  auto grammar = model::Grammar::parse("root ::= \"" + target + "\"");

  device::remote::testing_support::Worker w;
  std::vector<EngineOptions> setups = {cpu_engine_options(1, 1, 64), cpu_engine_options(2, 1, 64),
                                       cpu_engine_options(3, 1, 64), cpu_engine_options(2, 1, 64),
                                       cpu_engine_options(2, 1, 64)};
  setups[3].devices[1] = {device::DeviceSpec::Kind::Remote, 1, -1, w.address()};
  setups[4].mode = parallel::SplitMode::Layer;
  for (size_t i = 0; i < setups.size(); ++i) {
    Engine e(*m.file, setups[i]);
    model::GrammarConstraint c(grammar, texts);
    SeqStep q;
    q.tokens = prompt;
    q.sample = true;
    q.sampling.temp = 0;
    q.constraint = &c;
    const SeqOutput o = e.step_batch({&q, 1})[0];
    EXPECT_EQ(o.token, want) << "setup " << i << ": " << o.error;
    EXPECT_EQ(e.n_past(0), 3);
    for (const auto& d : e.devices()) EXPECT_EQ(d->stats().steps, 1u) << d->name() << " in setup " << i;
  }
}

TEST(ConstrainedGeneration, NoTokenCanContinueIsAnError) {
  GeneratedModel m;
  Engine e(*m.file, cpu_engine_options(2, 1, 64));
  // A vocabulary whose every token is a control token: nothing can start "a".
  auto texts = std::make_shared<model::TokenTexts>(
      std::vector<std::string>(m.tok->n_vocab()),
      std::vector<model::TokenTexts::Kind>(m.tok->n_vocab(), model::TokenTexts::Kind::Control));
  model::GrammarConstraint c(model::Grammar::parse(R"(root ::= "a")"), texts);
  std::vector<Token> prompt = {1, 2, 3};
  SeqStep q;
  q.tokens = prompt;
  q.sample = true;
  q.sampling.temp = 0;
  q.constraint = &c;
  SeqOutput o = e.step_batch({&q, 1})[0];
  EXPECT_EQ(o.token, -1);
  EXPECT_NE(o.error.find("no token of the vocabulary continues the grammar"), std::string::npos) << o.error;
  EXPECT_EQ(e.n_past(0), 3);  // the whole-vocabulary re-run fed nothing twice
  // Through generate: the run fails with that error rather than hanging.
  Engine e2(*m.file, cpu_engine_options(1, 1, 64));
  model::SamplingParams p;
  p.temp = 0;
  auto prompt2 = m.tok->encode("x", true, false);
  EXPECT_ERROR(
      generate(e2, m.tok.get(), prompt2, 8, p, {}, model::Grammar::parse("root ::= \"a\" [^\\x00-\\U0010FFFF]")),
      "no token of the vocabulary continues the grammar");
}

}  // namespace
}  // namespace weft::runtime
