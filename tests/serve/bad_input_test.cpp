// Bad requests get an OpenAI-style error object with the right status and a message naming the
// problem, and the server goes on serving; API keys are checked.
#include "test_server.h"

#include "support/expect_error.h"

namespace weft::serve::test_support {
namespace {

constexpr size_t kBodyLimit = 4096;

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new weft::test_support::GeneratedModel();
    ServerOptions so;
    so.max_body_bytes = kBodyLimit;
    server_ = new TestServer(*model_->file, *model_->tok, weft::test_support::cpu_engine_options(1, 1, 64), so);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  void SetUp() override { client_ = std::make_unique<httplib::Client>(server_->client()); }
  // Posts and returns the error message, expecting `status`.
  std::string refused(const std::string& path, const std::string& body, int status = 400) {
    const Reply r = post(*client_, path, body);
    EXPECT_EQ(r.status, status) << body << " -> " << r.text;
    return error_message(r);
  }
  std::string completion_refused(const json& fields, int status = 400) {
    json body = {{"prompt", "hello"}, {"max_tokens", 2}};
    body.update(fields);
    return refused("/v1/completions", body.dump(), status);
  }

  static inline weft::test_support::GeneratedModel* model_ = nullptr;
  static inline TestServer* server_ = nullptr;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(BadInput, MalformedBodies) {
  EXPECT_EQ(refused("/v1/completions", "{\"prompt\": ").rfind("the body is not valid JSON: ", 0), 0u);
  EXPECT_EQ(refused("/v1/chat/completions", "[1, 2]"), "the body must be a JSON object, got array");
  EXPECT_EQ(refused("/v1/completions", "   ").rfind("the body is not valid JSON: ", 0), 0u);
}

TEST_F(BadInput, WrongTypes) {
  EXPECT_EQ(completion_refused({{"temperature", "hot"}}), "'temperature' must be a number, got string");
  EXPECT_EQ(completion_refused({{"prompt", 5}}),
            "'prompt' must be a string, an array of token ids, or an array of those, got number");
  EXPECT_EQ(completion_refused({{"prompt", {1, "x"}}}), "'prompt' must hold token ids (integers), got string");
  EXPECT_EQ(completion_refused({{"stop", {1}}}),
            "'stop' must be a string or an array of strings, got an array holding number");
  EXPECT_EQ(completion_refused({{"stream", "yes"}}), "'stream' must be true or false, got string");
  EXPECT_EQ(completion_refused({{"stream_options", 3}}), "'stream_options' must be an object, got number");
  EXPECT_EQ(completion_refused({{"max_tokens", 1.5}}), "'max_tokens' must be an integer, got number");
  EXPECT_EQ(completion_refused({{"top_k", "many"}}), "'top_k' must be an integer, got string");
  EXPECT_EQ(refused("/v1/chat/completions", R"({"messages": "hi"})"), "'messages' must be an array, got string");
  EXPECT_EQ(refused("/v1/chat/completions", R"({"messages": [{"content": "hi"}]})"),
            "messages[0].role must be a string");
  EXPECT_EQ(refused("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 3}]})"),
            "messages[0].content must be a string or an array of parts, got number");
}

TEST_F(BadInput, EmptyOrMissingMessagesAndPrompt) {
  EXPECT_EQ(refused("/v1/chat/completions", R"({"messages": []})"),
            "'messages' is empty: at least one message is needed");
  EXPECT_EQ(refused("/v1/chat/completions", R"({"model": "x"})"), "'messages' is missing");
  EXPECT_EQ(refused("/v1/completions", R"({"max_tokens": 3})"), "'prompt' is missing");
  EXPECT_EQ(completion_refused({{"prompt", json::array()}}), "the prompt is empty");
}

TEST_F(BadInput, OutOfRangeValues) {
  EXPECT_EQ(completion_refused({{"max_tokens", -1}}), "'max_tokens' must be between 0 and 1048576, got -1");
  EXPECT_EQ(completion_refused({{"max_completion_tokens", 1000000000000}}),
            "'max_completion_tokens' must be between 0 and 1048576, got 1000000000000");
  EXPECT_EQ(completion_refused({{"temperature", -0.5}}), "'temperature' must be between 0 and 100, got -0.5");
  EXPECT_EQ(completion_refused({{"top_p", 2}}), "'top_p' must be between 0 and 1, got 2");
  EXPECT_EQ(completion_refused({{"presence_penalty", 9}}), "'presence_penalty' must be between -2 and 2, got 9");
  EXPECT_EQ(completion_refused({{"n", 2}}), "'n' must be 1: one choice per request is supported, got 2");
  EXPECT_EQ(completion_refused({{"prompt", {1, 320}}}), "token id 320 is outside the vocabulary (0..319)");
}

TEST_F(BadInput, PromptLongerThanTheContext) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "a b c ";
  const std::string m = completion_refused({{"prompt", text}});
  EXPECT_NE(m.find("tokens, a slot holds 64 positions (-c divided among -np slots)"), std::string::npos) << m;
}

TEST_F(BadInput, BodyOverTheLimitIs413) {
  const std::string big = json{{"prompt", std::string(kBodyLimit, 'x')}}.dump();
  EXPECT_EQ(refused("/v1/completions", big, 413), "the request body is larger than the limit of 4096 bytes");
}

TEST_F(BadInput, ServerGoesOnServingAfterBadRequests) {
  completion_refused({{"temperature", "hot"}});
  refused("/v1/completions", "{{{");
  const Reply r = post(*client_, "/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 2);
}

TEST(ApiKey, RequiredOnEveryEndpointButHealthModelsAndThePage) {
  weft::test_support::GeneratedModel m;
  ServerOptions so;
  so.api_key = "sesame-0123456789";
  TestServer server(*m.file, *m.tok, weft::test_support::cpu_engine_options(1, 1, 64), so);
  auto c = server.client();
  c.set_keep_alive(true);  // as the openai client is: the server must say when it closes
  const json body = {{"prompt", "hi"}, {"max_tokens", 1}};
  Reply r = post(c, "/v1/completions", body);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(error_message(r), "no API key: send the header 'Authorization: Bearer KEY'");
  EXPECT_EQ(r.body["error"]["type"], "authentication_error");
  // Refused before its body was read, so the connection closes: the client is told, or it sends
  // its next request on a socket about to close (a connection error in the e2e suite).
  EXPECT_EQ(r.connection, "close");
  r = post(c, "/v1/completions", body, {{"Authorization", "Bearer sesame-0123456788"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(error_message(r), "invalid API key");
  EXPECT_EQ(get(c, "/metrics").status, 401);
  EXPECT_EQ(post(c, "/v1/completions", body, {{"Authorization", "Bearer sesame-0123456789"}}).status, 200);
  EXPECT_EQ(post(c, "/tokenize", json{{"content", "a"}}, {{"X-Api-Key", "sesame-0123456789"}}).status, 200);
  EXPECT_EQ(get(c, "/health").status, 200);
  EXPECT_EQ(get(c, "/v1/models").status, 200);
  EXPECT_EQ(get(c, "/").status, 200);
}

TEST(ApiKey, NeededToListenBeyondLoopback) {
  ServerOptions so;
  so.host = "0.0.0.0";
  so.port = 0;
  EXPECT_ERROR(Server{so}, "listening on 0.0.0.0 beyond loopback requires --api-key or --api-key-file");
  so.api_key = "sesame-0123456789";
  Server ok(so);
  EXPECT_GT(ok.port(), 0);
}

TEST(ChatTemplate, UnknownNameIsAnErrorNamingTheFlag) {
  weft::test_support::GeneratedModel m;
  EXPECT_ERROR(chat::Template::resolve(*m.file, "nonesuch"),
               "--chat-template 'nonesuch' is neither a built-in template name nor a template weft recognises");
  EXPECT_EQ(chat::Template::resolve(*m.file, "").name(), "chatml");  // none in the file: llama.cpp's default
}

}  // namespace
}  // namespace weft::serve::test_support
