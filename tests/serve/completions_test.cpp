// /v1/completions and /v1/chat/completions on stories260K: whole and streamed replies in
// OpenAI's shapes, usage counts, stop strings, several prompts, token prompts.
#include "test_server.h"

namespace weft::serve::test_support {
namespace {

// stories260K's greedy continuation of "Once upon a time" (SOURCES.txt).
const std::string kGreedy =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.";

class Completions : public StoriesServer {
 protected:
  static Reply complete(const json& extra, const char* path = "/v1/completions") {
    json body = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 8}};
    if (extra.is_object()) body.update(extra);
    auto c = server_->client();
    return post(c, path, body);
  }
  static Reply chat(const json& extra) {
    json body = {
        {"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"temperature", 0}, {"max_tokens", 6}};
    if (extra.is_object()) body.update(extra);
    auto c = server_->client();
    return post(c, "/v1/chat/completions", body);
  }
  // The payloads of a stream, checked: JSON chunks, then "[DONE]".
  static std::vector<json> chunks(const Reply& r) {
    EXPECT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.content_type, "text/event-stream");
    std::vector<std::string> payloads = sse_payloads(r.text);
    EXPECT_FALSE(payloads.empty());
    if (payloads.empty()) return {};
    EXPECT_EQ(payloads.back(), "[DONE]");
    payloads.pop_back();
    std::vector<json> out;
    for (const auto& p : payloads) out.push_back(json::parse(p));
    return out;
  }
};

TEST_F(Completions, WholeReplyHasTheGreedyTextAndUsage) {
  const Reply r = complete({});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["object"], "text_completion");
  EXPECT_EQ(r.body["model"], "stories");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  const json& c = r.body["choices"][0];
  const std::string text = c["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(kGreedy.rfind(text, 0), 0u) << text;
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], 5);  // BOS + 4 (SOURCES.txt)
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 8);
  EXPECT_EQ(r.body["usage"]["total_tokens"], 13);
}

TEST_F(Completions, StreamedChunksAddUpToTheWholeReply) {
  const std::string whole = complete({}).body["choices"][0]["text"];
  const auto events = chunks(complete({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_GE(events.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    text += events[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, whole);
  // One text event per token (stories260K's pieces are whole characters), however fast they came.
  EXPECT_EQ(events.size() - 2, 8u);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  const json& usage_chunk = events.back();
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 8);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], 5);
}

TEST_F(Completions, StreamWithoutUsageEndsWithTheFinishChunk) {
  const auto events = chunks(complete({{"stream", true}}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  for (const auto& e : events) EXPECT_FALSE(e.contains("usage"));
}

TEST_F(Completions, StopStringEndsTheTextBeforeIt) {
  const Reply r = complete({{"stop", "Lily"}, {"max_tokens", 40}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["choices"][0]["text"], ", there was a little girl named ");
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
}

TEST_F(Completions, StreamedStopStringIsNeverSentInPart) {
  const auto events = chunks(complete({{"stream", true}, {"stop", {"park.", "zzz"}}, {"max_tokens", 40}}));
  std::string text;
  for (const auto& e : events) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, ", there was a little girl named Lily. She loved to play outside in the ");
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "stop");
}

TEST_F(Completions, TokenPromptAndMaxCompletionTokens) {
  const Reply text = complete({});
  const Reply ids = complete({{"prompt", {1, 403, 407, 261, 378}}});
  ASSERT_EQ(ids.status, 200) << ids.text;
  EXPECT_EQ(ids.body["choices"][0]["text"], text.body["choices"][0]["text"]);
  const Reply shorter = complete({{"max_completion_tokens", 3}, {"max_tokens", nullptr}});
  EXPECT_EQ(shorter.body["usage"]["completion_tokens"], 3);
}

TEST_F(Completions, SeveralPromptsGetOneChoiceEach) {
  const Reply one = complete({});
  const Reply r = complete({{"prompt", {"Once upon a time", "The dog"}}});
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  EXPECT_EQ(r.body["choices"][0]["index"], 0);
  EXPECT_EQ(r.body["choices"][1]["index"], 1);
  EXPECT_EQ(r.body["choices"][0]["text"], one.body["choices"][0]["text"]);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 16);
}

TEST_F(Completions, SeededSamplingRepeatsAndUnknownFieldsAreIgnored) {
  const json sampled = {{"temperature", 1.0},
                        {"seed", 1234},
                        {"max_tokens", 16},
                        {"top_k", 0},
                        {"min_p", 0},
                        {"presence_penalty", 0.5},
                        {"frequency_penalty", 0.2},
                        {"repeat_penalty", 1.1},
                        {"logprobs", nullptr},
                        {"user", "someone"},
                        {"frobnicate", {1, 2}}};
  const Reply a = complete(sampled), b = complete(sampled);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(a.body["choices"][0]["text"], b.body["choices"][0]["text"]);
}

TEST_F(Completions, ChatReplyCountsTheRenderedPrompt) {
  const Reply r = chat({});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["object"], "chat.completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& c = r.body["choices"][0];
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_TRUE(c["message"]["content"].is_string());
  EXPECT_EQ(c["finish_reason"], "length");
  auto client = server_->client();
  const Reply prompt =
      post(client, "/apply-template", json{{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}});
  const Reply tokens = post(client, "/tokenize", json{{"content", prompt.body["prompt"]}, {"add_special", true}});
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], tokens.body["tokens"].size());
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 6);
}

TEST_F(Completions, StreamedChatOpensWithTheRoleAndAddsUpToTheWholeReply) {
  const std::string whole = chat({}).body["choices"][0]["message"]["content"];
  const auto events = chunks(chat({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += events[i]["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(text, whole);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 6);
}

TEST_F(Completions, ChatContentMayBeAnArrayOfTextParts) {
  const Reply plain = chat({});
  const Reply parts =
      chat({{"messages",
             {{{"role", "user"},
               {"content", {{{"type", "text"}, {"text", "Tell me "}}, {{"type", "text"}, {"text", "a story"}}}}}}}});
  ASSERT_EQ(parts.status, 200) << parts.text;
  EXPECT_EQ(parts.body["choices"][0]["message"]["content"], plain.body["choices"][0]["message"]["content"]);
}

}  // namespace
}  // namespace weft::serve::test_support
