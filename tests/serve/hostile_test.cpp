// A live server against clients that do not play fair: bodies past the limit by other framings,
// bodies where none is taken, slow heads, pages of other origins, half-closes, a stop mid-stream.
#include "raw_http.h"
#include "test_server.h"

#include "support/expect_error.h"

#include <future>

namespace weft::serve::test_support {
namespace {

using weft::test_support::cpu_engine_options;
using weft::test_support::GeneratedModel;

constexpr int kHeadTimeoutMs = 1000;
constexpr size_t kPerClient = 32;

class Hostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new GeneratedModel();
    ServerOptions so;
    so.http_threads = 16;  // fewer than the slow clients below
    so.head_timeout_ms = kHeadTimeoutMs;
    so.max_waiting_per_client = kPerClient;
    so.cors_origins = {"https://app.example"};
    server_ = new TestServer(*model_->file, *model_->tok, cpu_engine_options(1, 1, 64), so);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
  }
  static int port() { return server_->server().port(); }
  // Sends `request` on a new connection and returns all the server sends back before it closes.
  static std::string exchange(const std::string& request, bool half_close = false) {
    RawClient c(port());
    EXPECT_TRUE(c.send(request));
    if (half_close) c.shut_wr();
    return c.read_all();
  }
  static std::string json_post(const std::string& path, const std::string& body, const std::string& extra = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n" + extra + "\r\n" + body;
  }

  static inline GeneratedModel* model_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

TEST_F(Hostile, ChunkedBodyIsRefusedUnread) {
  // httplib 0.11 read chunked bodies whole, past any limit; the body is never sent here.
  RawClient c(port());
  ASSERT_TRUE(
      c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n"));
  const std::string reply = c.read_all();  // before sending the body: it is refused on its head alone
  EXPECT_EQ(status_of(reply), 411) << reply;
  EXPECT_NE(body_of(reply).find("chunked request bodies are not accepted"), std::string::npos) << reply;
}

TEST_F(Hostile, ContentLengthWithChunkedIs400) {
  const std::string r = exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(r), 400) << r;
}

TEST_F(Hostile, CompressedBodyIs415) {
  const std::string r = exchange(json_post("/v1/completions", std::string(64, '\0'), "Content-Encoding: gzip\r\n"));
  EXPECT_EQ(status_of(r), 415) << r;
}

TEST_F(Hostile, BodyPostedToHealthIsRefusedUnread) {
  // The body is never sent: a server that waited to read it would answer nothing in time.
  RawClient c(port(), 3000);
  ASSERT_TRUE(c.send("POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000000\r\n\r\n"));
  const std::string r = c.read_all();
  EXPECT_EQ(status_of(r), 404) << r;
  EXPECT_NE(r.find("no such endpoint: POST /health"), std::string::npos) << r;
}

TEST_F(Hostile, OversizeContentLengthIs413NamingTheLimit) {
  RawClient c(port(), 3000);
  ASSERT_TRUE(
      c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: 600000000\r\n\r\n"));
  const std::string r = c.read_all();
  EXPECT_EQ(status_of(r), 413) << r;
  EXPECT_NE(r.find("the request body is larger than the limit of 8388608 bytes"), std::string::npos) << r;
}

TEST_F(Hostile, NonJsonBodiesAre415) {
  const std::string form = "prompt=" + std::string(9000, 'a');  // was a 413 claiming an 8 MiB limit
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain"}) {
    const std::string r =
        exchange("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + std::string(type) +
                 "\r\nContent-Length: " + std::to_string(form.size()) + "\r\n\r\n" + form);
    EXPECT_EQ(status_of(r), 415) << type << ": " << r;
    EXPECT_NE(r.find("the request body must be JSON: send 'Content-Type: application/json'"), std::string::npos);
  }
}

TEST_F(Hostile, ForeignHostAndOriginAre403) {
  std::string r = exchange("GET /v1/models HTTP/1.1\r\nHost: rebound.evil.example:8080\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  r = exchange(json_post("/tokenize", R"({"content": "a"})", "Origin: https://evil.example\r\n"));
  EXPECT_EQ(status_of(r), 403) << r;
  r = exchange(json_post("/tokenize", R"({"content": "a"})", "Origin: http://127.0.0.1\r\n"));  // its own page
  EXPECT_EQ(status_of(r), 200) << r;
}

TEST_F(Hostile, AllowedOriginGetsItsPreflightAnswered) {
  std::string r = exchange(
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\n"
      "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\nConnection: "
      "close\r\n\r\n");
  EXPECT_EQ(status_of(r), 204) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Origin: https://app.example\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Headers: Authorization, Content-Type"), std::string::npos) << r;
  r = exchange(json_post("/tokenize", R"({"content": "a"})", "Origin: https://app.example\r\n"));
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Origin: https://app.example\r\n"), std::string::npos) << r;
}

TEST_F(Hostile, HalfClosedClientGetsItsReply) {
  std::string r = exchange("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", /*half_close=*/true);
  EXPECT_EQ(status_of(r), 200) << r;
  r = exchange(json_post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})"), /*half_close=*/true);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("\"completion_tokens\":2"), std::string::npos) << r;
}

TEST_F(Hostile, PipelinedRequestsAreEachServed) {
  const std::string r =
      exchange("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + json_post("/tokenize", R"({"content": "a"})"));
  EXPECT_EQ(r.find("HTTP/1.1 200"), 0u) << r;
  EXPECT_NE(r.find("HTTP/1.1 200", 1), std::string::npos) << r;
  EXPECT_NE(r.find("\"tokens\""), std::string::npos) << r;
}

TEST_F(Hostile, SlowHeadsLeaveHealthAnswered) {
  // More slow clients than there are threads, each trickling its head a byte at a time: httplib
  // gave each a thread for as long as the bytes kept coming.
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 24; ++i) slow.push_back(std::make_unique<RawClient>(port()));
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (size_t i = 0; i < head.size() && !done; ++i) {
      for (auto& c : slow) c->send(head.substr(i, 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client c("127.0.0.1", port());
  c.set_read_timeout(4);  // httplib's per-read wait was 5 s, renewed by each byte
  const Reply r = get(c, "/health");
  done = true;
  trickle.join();
  EXPECT_EQ(r.status, 200);
}

TEST_F(Hostile, SlowHeadIsCutAtTheDeadline) {
  RawClient c(port(), 5 * kHeadTimeoutMs);
  ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\n"));
  for (int i = 0; i < 3 * kHeadTimeoutMs / 100 && c.send("X"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string r = c.read_all();
  EXPECT_EQ(status_of(r), 408) << r;
}

TEST_F(Hostile, OneClientsWaitingConnectionsAreCapped) {
  std::vector<std::unique_ptr<RawClient>> idle;
  for (size_t i = 0; i < kPerClient + 4; ++i) {
    idle.push_back(std::make_unique<RawClient>(port(), 3000));
    ASSERT_TRUE(idle.back()->send("G"));
  }
  // The oldest made room for the newest; the newest still wait.
  EXPECT_TRUE(idle.front()->closed_by_server());
  EXPECT_TRUE(idle.back()->send("ET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(status_of(idle.back()->read_all()), 200);
}

TEST_F(Hostile, ParseErrorsDoNotEchoTheBody) {
  auto c = server_->client();
  const Reply r = post(c, "/v1/completions", "\"" + std::string(1 << 20, 'x'));
  EXPECT_EQ(r.status, 400);
  EXPECT_LT(r.text.size(), 1000u);
  EXPECT_EQ(error_message(r).rfind("the body is not valid JSON: ", 0), 0u);
  const Reply deep =
      post(c, "/v1/completions", R"({"prompt": )" + std::string(100000, '[') + "1" + std::string(100000, ']') + "}");
  EXPECT_EQ(deep.status, 400);
  EXPECT_EQ(error_message(deep), "the body nests deeper than 64 levels");
}

TEST_F(Hostile, TokenizeRepliesAreWellFormed) {
  auto c = server_->client();
  const Reply plain = post(c, "/tokenize", json{{"content", "ab \"c"}});
  const Reply pieces = post(c, "/tokenize", json{{"content", "ab \"c"}, {"with_pieces", true}});
  ASSERT_EQ(plain.status, 200) << plain.text;
  ASSERT_EQ(pieces.status, 200) << pieces.text;
  ASSERT_EQ(plain.body["tokens"].size(), pieces.body["tokens"].size());
  ASSERT_GT(plain.body["tokens"].size(), 0u);
  std::string text;
  for (size_t i = 0; i < pieces.body["tokens"].size(); ++i) {
    EXPECT_EQ(pieces.body["tokens"][i]["id"], plain.body["tokens"][i]);
    text += pieces.body["tokens"][i]["piece"].get<std::string>();
  }
  EXPECT_NE(text.find("\"c"), std::string::npos) << text;
}

TEST(ServeKey, ShortKeyIsRefusedBeyondLoopback) {
  ServerOptions so;
  so.host = "0.0.0.0";
  so.port = 0;
  so.api_key = "x";
  EXPECT_ERROR(Server{so}, "the API key is 1 bytes: listening beyond loopback needs at least 16");
  so.host = "127.0.0.1";
  so.cors_origins = {"*"};
  so.api_key.clear();
  EXPECT_ERROR(Server{so}, "--cors-origin '*' lets every web page use the server: it requires an API key");
}

// One slot, one queue place, a long context: what runs when the server stops is still running.
// Before, a stream was cut without a word and a waiting request got no reply (499 in the counts).
TEST(ServeStop, StreamsEndWithAnErrorEventAndQueuedRequestsWith503) {
  tools::GenModelOptions mo;
  mo.n_ctx = 8192;
  GeneratedModel model(mo);
  TestServer server(*model.file, *model.tok, cpu_engine_options(1, 1, 8192), {}, {1});
  std::string streamed;
  auto running = std::async(std::launch::async, [&] {
    auto c = server.client();
    return post_streaming(c, "/v1/completions",
                          json{{"prompt", "hello"}, {"temperature", 1}, {"seed", 3}, {"stream", true}},
                          [&](const char* d, size_t n) {
                            streamed.append(d, n);
                            return true;
                          });
  });
  ASSERT_TRUE(eventually([&] { return server.scheduler().stats().generated_tokens > 0; }));
  auto queued = std::async(std::launch::async, [&] {
    auto c = server.client();
    return post(c, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}});
  });
  ASSERT_TRUE(eventually([&] { return server.scheduler().stats().queued == 1; }));
  // No grace: this stream runs some 2,000 tokens (a quarter second) before its end-of-text.
  server.server().shutdown(std::chrono::milliseconds(0));
  const Reply q = queued.get();
  EXPECT_EQ(q.status, 503) << q.text;
  EXPECT_EQ(error_message(q), "the server is shutting down");
  running.wait();
  const auto events = sse_payloads(streamed);
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back().find("the server is shutting down"), std::string::npos) << events.back();
}

}  // namespace
}  // namespace weft::serve::test_support
