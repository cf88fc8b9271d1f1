// A worker that dies mid-request: with a device left the request goes on (the engine re-plans
// around the loss) and /metrics counts it; the last device lost fails the requests in flight with
// 500 naming it, /health reports the server down, and new requests get 503 naming it (the worker
// is retried) instead of hanging.
#include "test_server.h"

#include "device/device_spec.h"
#include "device/worker_process.h"

#include <fstream>
#include <future>

namespace weft::serve::test_support {
namespace {

TEST(ServeRemote, DeadWorkerFailsRequestsWith500NamingIt) {
  // A model on disk (the worker is sent its weights) with room for a long generation.
  tools::GenModelOptions o;
  o.n_ctx = 8192;
  const std::string path = ::testing::TempDir() + "/serve_remote_model.gguf";
  const auto bytes = tools::generate_model_bytes(o);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto file = gguf::File::open(path);
  auto tok = tokenizer::Tokenizer::from_gguf(*file);

  device::remote::testing_support::Worker worker;
  runtime::EngineOptions eo;
  eo.devices = device::parse_devices(worker.url());
  eo.mode = parallel::SplitMode::None;
  eo.n_seq = 1;
  eo.n_ctx = 8192;
  TestServer server(*file, *tok, eo);

  auto c = server.client();
  auto running = std::async(std::launch::async, [&] {
    auto mine = server.client();
    return post(mine, "/v1/completions", json{{"prompt", "hello"}, {"temperature", 0}});
  });
  ASSERT_TRUE(eventually([&] { return server.scheduler().stats().generated_tokens > 0; }));
  worker.kill(SIGKILL);
  const Reply r = running.get();
  EXPECT_EQ(r.status, 500) << r.text;
  EXPECT_NE(error_message(r).find(worker.url()), std::string::npos) << r.text;
  EXPECT_EQ(r.body["error"]["type"], "server_error");

  // Down, not dead: the lost worker is retried, so /health and new requests say 503 with
  // Retry-After, naming it, until it answers again.
  const Reply health = get(c, "/health");
  EXPECT_EQ(health.status, 503) << health.text;
  EXPECT_EQ(health.body["status"], "down") << health.text;
  EXPECT_NE(health.text.find(worker.url()), std::string::npos) << health.text;
  const Reply after = post(c, "/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 2}});
  EXPECT_EQ(after.status, 503) << after.text;
  EXPECT_EQ(after.retry_after, "1");
  EXPECT_NE(error_message(after).find("no device is up"), std::string::npos) << after.text;
  EXPECT_NE(error_message(after).find(worker.url()), std::string::npos) << after.text;
}

// Two workers; one is killed while a request generates. The reply is the one the surviving worker
// gives alone afterwards (the same greedy text), and /metrics shows the loss. Restarted on its port,
// the worker rejoins between requests (an idle scheduler retries lost workers every 2 s), and the
// next request runs over both devices again, with the same text.
TEST(ServeRemote, LostWorkerIsReplannedAroundMidRequestAndRejoinsWhenRestarted) {
  auto file = gguf::File::open(stories_path());
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  device::remote::testing_support::Worker w1, w2;
  runtime::EngineOptions eo;
  eo.devices = device::parse_devices(w1.url() + "," + w2.url());
  eo.n_seq = 1;
  eo.n_ctx = 1024;
  TestServer server(*file, *tok, eo);
  const json request = {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 800}};

  auto running = std::async(std::launch::async, [&] {
    auto mine = server.client();
    return post(mine, "/v1/completions", request);
  });
  ASSERT_TRUE(eventually([&] { return server.scheduler().stats().generated_tokens > 20; }));
  w2.kill(SIGKILL);
  const Reply during = running.get();
  ASSERT_EQ(during.status, 200) << during.text;
  auto c = server.client();
  const Reply after = post(c, "/v1/completions", request);
  ASSERT_EQ(after.status, 200) << after.text;
  EXPECT_EQ(during.body["choices"][0]["text"], after.body["choices"][0]["text"]);
  EXPECT_EQ(during.body["usage"]["completion_tokens"], 800);

  const Reply m = get(c, "/metrics");
  for (const char* line : {"\nweft_device_losses_total 1", "\nweft_devices 1"})
    EXPECT_NE(m.text.find(line), std::string::npos) << "no '" << line << "' in:\n" << m.text;

  w2.restart();
  ASSERT_TRUE(eventually([&] { return get(c, "/metrics").text.find("\nweft_devices 2") != std::string::npos; }))
      << get(c, "/metrics").text;
  const Reply rejoined = post(c, "/v1/completions", request);
  ASSERT_EQ(rejoined.status, 200) << rejoined.text;
  EXPECT_EQ(rejoined.body["choices"][0]["text"], during.body["choices"][0]["text"]);
  const Reply m2 = get(c, "/metrics");
  for (const char* line : {"\nweft_device_losses_total 1", "\nweft_devices 2"})  // no loss on the way
    EXPECT_NE(m2.text.find(line), std::string::npos) << "no '" << line << "' in:\n" << m2.text;
}

}  // namespace
}  // namespace weft::serve::test_support
