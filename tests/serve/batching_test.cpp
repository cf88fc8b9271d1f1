// Requests served together: concurrent requests get the greedy text each gets alone, a full
// queue answers 503 with Retry-After, and a client that leaves frees its slot.
#include "test_server.h"

#include <atomic>
#include <future>

namespace weft::serve::test_support {
namespace {

using weft::test_support::cpu_engine_options;
using weft::test_support::GeneratedModel;

json greedy_request(int i) {
  json prompt = json::array({1});
  for (int k = 0; k < 3 + i * 2; ++k) prompt.push_back(3 + (i * 37 + k * 11) % 300);
  return {{"prompt", prompt}, {"temperature", 0}, {"max_tokens", 8}};
}

// Batch invariance over HTTP: 8 requests at once on 3 slots (the rest queued), on 1, 2 and 3
// devices, give the texts each request gets alone on a one-slot server.
class ConcurrentRequests : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrentRequests, GiveWhatEachGetsAlone) {
  GeneratedModel m;
  constexpr int kRequests = 8;
  std::vector<json> alone;
  {
    TestServer server(*m.file, *m.tok, cpu_engine_options(GetParam(), 1, 64));
    auto c = server.client();
    for (int i = 0; i < kRequests; ++i) {
      const Reply r = post(c, "/v1/completions", greedy_request(i));
      ASSERT_EQ(r.status, 200) << r.text;
      alone.push_back(r.body["choices"][0]["text"]);
    }
  }
  TestServer server(*m.file, *m.tok, cpu_engine_options(GetParam(), 3, 64));
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < kRequests; ++i)
    replies.push_back(std::async(std::launch::async, [&server, i] {
      auto c = server.client();
      return post(c, "/v1/completions", greedy_request(i));
    }));
  for (int i = 0; i < kRequests; ++i) {
    const Reply r = replies[i].get();
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["choices"][0]["text"], alone[i]) << "request " << i;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 8);
  }
  EXPECT_NE(alone[0], alone[1]);
}

INSTANTIATE_TEST_SUITE_P(Devices, ConcurrentRequests, ::testing::Values(1, 2, 3));

// One slot, no queue, and room for generations far longer than a test waits: a request still
// running when the test acts on it cannot have ended on its own.
class OneSlot : public ::testing::Test {
 protected:
  OneSlot() : model_(long_context()), server_(*model_.file, *model_.tok, cpu_engine_options(1, 1, 8192), {}, {0}) {}
  static tools::GenModelOptions long_context() {
    tools::GenModelOptions o;
    o.n_ctx = 8192;
    return o;
  }
  bool busy() {
    return server_.scheduler().stats().busy_slots == 1 && server_.scheduler().stats().generated_tokens > 0;
  }
  bool idle() { return server_.scheduler().stats().busy_slots == 0; }
  static json endless(bool stream) { return {{"prompt", "hello"}, {"temperature", 0}, {"stream", stream}}; }

  GeneratedModel model_;
  TestServer server_;
};

TEST_F(OneSlot, FullQueueIs503WithRetryAfter) {
  httplib::Client first = server_.client();
  auto running = std::async(std::launch::async, [&] { return post(first, "/v1/completions", endless(false)); });
  ASSERT_TRUE(eventually([&] { return busy(); }));
  auto c = server_.client();
  const Reply r = post(c, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_EQ(error_message(r), "every slot is busy and the queue of waiting requests is full; retry later");
  EXPECT_EQ(r.body["error"]["type"], "unavailable_error");
  first.stop();  // the client leaves: its slot frees, the next request is served
  running.wait();
  ASSERT_TRUE(eventually([&] { return idle(); }));
  EXPECT_EQ(post(c, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}).status, 200);
}

TEST_F(OneSlot, StreamingClientThatLeavesIsCancelled) {
  auto c = server_.client();
  int chunks = 0;
  // The receiver says stop after the first chunks: the client closes the connection.
  auto r = post_streaming(c, "/v1/completions", endless(true), [&](const char*, size_t) { return ++chunks < 3; });
  EXPECT_FALSE(r);  // cancelled by the receiver
  EXPECT_EQ(chunks, 3);
  EXPECT_TRUE(eventually([&] { return idle(); }));
  EXPECT_LT(server_.scheduler().stats().generated_tokens, 8000u);  // stopped, not run to a full context
}

TEST_F(OneSlot, WaitingClientThatLeavesIsCancelled) {
  httplib::Client c = server_.client();
  auto running = std::async(std::launch::async, [&] { return post(c, "/v1/completions", endless(false)); });
  ASSERT_TRUE(eventually([&] { return busy(); }));
  c.stop();
  EXPECT_EQ(running.get().status, 0);  // no reply: the client left
  EXPECT_TRUE(eventually([&] { return idle(); }));
  const uint64_t generated = server_.scheduler().stats().generated_tokens;
  EXPECT_LT(generated, 8000u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(server_.scheduler().stats().generated_tokens, generated);  // nothing runs for nobody
}

}  // namespace
}  // namespace weft::serve::test_support
