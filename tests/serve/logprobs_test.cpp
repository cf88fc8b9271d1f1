// Log-probabilities on /v1/chat/completions (logprobs, top_logprobs) and /v1/completions (the
// legacy logprobs N) on stories260K: every bad value a 400 naming the field, OpenAI's shapes for
// whole replies and stream chunks, and a stream's logprobs adding up to the whole reply's.
#include "test_server.h"

namespace weft::serve::test_support {
namespace {

class Logprobs : public StoriesServer {
 protected:
  // A greedy request of 8 tokens with `extra`'s fields.
  static Reply greedy(const char* path, json body, const json& extra) {
    body.update({{"temperature", 0}, {"max_tokens", 8}});
    if (extra.is_object()) body.update(extra);
    auto c = server_->client();
    return post(c, path, body);
  }
  static Reply chat(const json& extra) {
    return greedy("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}}, extra);
  }
  static Reply complete(const json& extra) {
    return greedy("/v1/completions", {{"prompt", "Once upon a time"}}, extra);
  }
  static std::vector<json> chunks(const Reply& r) {
    EXPECT_EQ(r.status, 200) << r.text;
    std::vector<std::string> payloads = sse_payloads(r.text);
    EXPECT_FALSE(payloads.empty());
    if (!payloads.empty()) payloads.pop_back();  // [DONE]
    std::vector<json> out;
    for (const auto& p : payloads) out.push_back(json::parse(p));
    return out;
  }
  static std::string refused(const Reply& r) {
    EXPECT_EQ(r.status, 400) << r.text;
    return error_message(r);
  }
};

TEST_F(Logprobs, BadValuesAreRefusedNamingTheField) {
  EXPECT_EQ(refused(chat({{"logprobs", true}, {"top_logprobs", 21}})),
            "'top_logprobs' must be between 0 and 20, got 21");
  EXPECT_EQ(refused(chat({{"logprobs", true}, {"top_logprobs", -1}})),
            "'top_logprobs' must be between 0 and 20, got -1");
  EXPECT_EQ(refused(chat({{"logprobs", true}, {"top_logprobs", 2.5}})),
            "'top_logprobs' must be an integer, got number");
  EXPECT_EQ(refused(chat({{"logprobs", "yes"}})), "'logprobs' must be true or false, got string");
  EXPECT_EQ(refused(chat({{"top_logprobs", 3}})), "'top_logprobs' requires 'logprobs': true");
  EXPECT_EQ(refused(chat({{"logprobs", false}, {"top_logprobs", 3}})), "'top_logprobs' requires 'logprobs': true");
  EXPECT_EQ(refused(complete({{"logprobs", true}})), "'logprobs' must be an integer, got boolean");
  EXPECT_EQ(refused(complete({{"logprobs", 21}})), "'logprobs' must be between 0 and 20, got 21");
  EXPECT_EQ(refused(complete({{"logprobs", -2}})), "'logprobs' must be between 0 and 20, got -2");
}

TEST_F(Logprobs, ChatWholeReplyListsEveryTokenWithItsAlternatives) {
  const Reply r = chat({{"logprobs", true}, {"top_logprobs", 5}});
  ASSERT_EQ(r.status, 200) << r.text;
  const json& c = r.body["choices"][0];
  const json& content = c["logprobs"]["content"];
  ASSERT_TRUE(content.is_array()) << r.text;
  EXPECT_EQ(content.size(), 8u);  // max_tokens, no stop string in the way
  std::string bytes;
  for (const json& e : content) {
    EXPECT_TRUE(e["token"].is_string());
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    for (const json& b : e["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
    const json& top = e["top_logprobs"];
    ASSERT_EQ(top.size(), 5u);
    // Greedy: the token drawn is the likeliest, with the same number.
    EXPECT_EQ(top[0]["token"], e["token"]);
    EXPECT_EQ(top[0]["logprob"], e["logprob"]);
    for (size_t k = 1; k < top.size(); ++k) EXPECT_LE(top[k]["logprob"].get<double>(), top[k - 1]["logprob"]);
    for (const json& t : top) EXPECT_TRUE(t["bytes"].is_array());
  }
  EXPECT_EQ(bytes, c["message"]["content"].get<std::string>());
  // Not asked: none.
  const json plain = chat({}).body["choices"][0];
  EXPECT_TRUE(!plain.contains("logprobs") || plain["logprobs"].is_null()) << plain;
  // logprobs alone: each token's own, no alternatives.
  const Reply own = chat({{"logprobs", true}});  // held: a range-for over a temporary's member dangles
  for (const json& e : own.body["choices"][0]["logprobs"]["content"]) EXPECT_TRUE(e["top_logprobs"].empty());
}

TEST_F(Logprobs, CompletionsWholeReplyHasTheLegacyShape) {
  const Reply r = complete({{"logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.text;
  const json& c = r.body["choices"][0];
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << r.text;
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  ASSERT_EQ(lp["text_offset"].size(), 8u);
  std::string text;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lp["text_offset"][i], text.size());
    text += lp["tokens"][i].get<std::string>();
    const json& top = lp["top_logprobs"][i];
    EXPECT_LE(top.size(), 3u);
    ASSERT_TRUE(top.contains(lp["tokens"][i].get<std::string>())) << top;  // greedy: the token is the likeliest
    EXPECT_EQ(top[lp["tokens"][i].get<std::string>()], lp["token_logprobs"][i]);
  }
  EXPECT_EQ(text, c["text"].get<std::string>());
  EXPECT_TRUE(complete({}).body["choices"][0]["logprobs"].is_null());
}

TEST_F(Logprobs, StreamedChunksCarryTheirTokensLogprobs) {
  const json whole = chat({{"logprobs", true}, {"top_logprobs", 2}}).body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(whole.size(), 8u);
  json streamed = json::array();
  for (const json& ch : chunks(chat({{"logprobs", true}, {"top_logprobs", 2}, {"stream", true}}))) {
    const json& choice = ch["choices"][0];
    if (!choice.contains("logprobs") || choice["logprobs"].is_null()) {
      EXPECT_TRUE(choice["delta"].value("content", "").empty()) << ch;  // only role and finish chunks
      continue;
    }
    EXPECT_FALSE(choice["delta"]["content"].get<std::string>().empty());
    for (const json& e : choice["logprobs"]["content"]) streamed.push_back(e);
  }
  EXPECT_EQ(streamed, whole);

  const json legacy = complete({{"logprobs", 2}}).body["choices"][0]["logprobs"];
  ASSERT_EQ(legacy["tokens"].size(), 8u);
  json tokens = json::array(), offsets = json::array(), top = json::array();
  for (const json& ch : chunks(complete({{"logprobs", 2}, {"stream", true}}))) {
    const json& lp = ch["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
      tokens.push_back(lp["tokens"][i]);
      offsets.push_back(lp["text_offset"][i]);
      top.push_back(lp["top_logprobs"][i]);
    }
  }
  EXPECT_EQ(tokens, legacy["tokens"]);
  EXPECT_EQ(offsets, legacy["text_offset"]);
  EXPECT_EQ(top, legacy["top_logprobs"]);
}

}  // namespace
}  // namespace weft::serve::test_support
