// The endpoints besides generation: health (loading, ready), models, tokenize / detokenize /
// apply-template, metrics, the chat page, unknown paths.
#include "test_server.h"

#include <fmt/format.h>

namespace weft::serve::test_support {
namespace {

class Endpoints : public StoriesServer {
 protected:
  void SetUp() override {
    StoriesServer::SetUp();
    if (server_) client_ = std::make_unique<httplib::Client>(server_->client());
  }

  std::unique_ptr<httplib::Client> client_;
};

TEST_F(Endpoints, HealthAndModels) {
  const Reply h = get(*client_, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body["status"], "ok");
  const Reply m = get(*client_, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.body["object"], "list");
  EXPECT_EQ(m.body["data"][0]["id"], "stories");
  EXPECT_EQ(m.body["data"][0]["object"], "model");
}

TEST_F(Endpoints, TokenizeAndDetokenize) {
  // SOURCES.txt: BOS + "Once upon a time" -> [1, 403, 407, 261, 378].
  Reply r = post(*client_, "/tokenize", json{{"content", "Once upon a time"}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["tokens"], json({403, 407, 261, 378}));
  r = post(*client_, "/tokenize", json{{"content", "Once upon a time"}, {"add_special", true}, {"with_pieces", true}});
  ASSERT_EQ(r.body["tokens"].size(), 5u);
  EXPECT_EQ(r.body["tokens"][0]["id"], 1);
  EXPECT_EQ(r.body["tokens"][1]["piece"], " Once");
  r = post(*client_, "/detokenize", json{{"tokens", {403, 407, 261, 378}}});
  EXPECT_EQ(r.body["content"], "Once upon a time");
  r = post(*client_, "/detokenize", json{{"tokens", {403, 512}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_message(r), "'tokens': token id 512 is outside the vocabulary (0..511)");
  r = post(*client_, "/tokenize", json{{"content", 7}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_message(r), "'content' must be a string");
}

TEST_F(Endpoints, ApplyTemplateRendersTheMessages) {
  const Reply r =
      post(*client_, "/apply-template",
           json{{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["prompt"],
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(Endpoints, MetricsInPrometheusTextFormat) {
  ASSERT_EQ(post(*client_, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 3}}).status, 200);
  const Reply m = get(*client_, "/metrics");  // the completion was counted before its reply was sent
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  for (const char* line :
       {"# TYPE weft_requests_total counter", "weft_requests_total{status=\"200\"}",
        "# TYPE weft_generated_tokens_total counter", "# TYPE weft_prompt_tokens_total counter",
        "# TYPE weft_generated_tokens_per_second gauge", "# TYPE weft_queue_depth gauge", "weft_slots_busy 0",
        "weft_slots 2", "weft_device_compute_seconds_total{device=\"cpu:0\"}",
        "weft_device_collective_seconds_total{device=\"cpu:0\"}", "weft_device_losses_total 0", "weft_devices 1"})
    EXPECT_NE(m.text.find(line), std::string::npos) << "no '" << line << "' in:\n" << m.text;
  // The totals count what the scheduler did, at least this test's 3 tokens.
  const auto at = m.text.find("\nweft_generated_tokens_total ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stod(m.text.substr(at + 29)), 3.0);
  // httplib's own refusals are counted with their status, before their reply too.
  ASSERT_EQ(get(*client_, "/no/such/endpoint").status, 404);
  EXPECT_NE(get(*client_, "/metrics").text.find("weft_requests_total{status=\"404\"} 1"), std::string::npos);
}

TEST_F(Endpoints, ChatPageStreamsFromTheChatEndpoint) {
  const Reply r = get(*client_, "/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type.rfind("text/html", 0), 0u);
  EXPECT_NE(r.text.find("<html"), std::string::npos);
  EXPECT_NE(r.text.find("/v1/chat/completions"), std::string::npos);
  EXPECT_NE(r.text.find("stream: true"), std::string::npos);
}

TEST_F(Endpoints, UnknownPathIsA404ErrorObject) {
  const Reply r = get(*client_, "/v1/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_message(r), "no such endpoint: GET /v1/nothing");
  EXPECT_EQ(r.body["error"]["type"], "not_found_error");
}

// Before its model has loaded the server answers, saying so.
TEST(ServerLoading, HealthIs503UntilTheModelIsSet) {
  ServerOptions so;
  so.port = 0;
  Server server(so);
  server.start();
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(10);
  Reply r = get(c, "/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(error_message(r), "the model is loading");
  EXPECT_EQ(r.body["error"]["type"], "unavailable_error");
  r = post(c, "/v1/completions", json{{"prompt", "x"}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_EQ(get(c, "/metrics").status, 200);
  EXPECT_EQ(get(c, "/v1/models").status, 200);
  weft::test_support::GeneratedModel m;
  runtime::Engine engine(*m.file, weft::test_support::cpu_engine_options(1, 1, 64));
  runtime::Scheduler scheduler(engine, *m.tok);
  const auto chat = chat::Template::resolve(*m.file, "");
  server.set_model({m.tok.get(), &chat, &scheduler});
  EXPECT_EQ(get(c, "/health").status, 200);
  server.stop();
}

// A model that carries its own template (llama3 here) and the control tokens it writes: chat
// prompts are rendered with it and its markers are read as single tokens.
TEST(ServeChatTemplate, TheModelsTemplateAndControlTokensAreUsed) {
  const chat::Template llama3(chat::Family::Llama3);
  tools::GenModelOptions o;
  o.chat_template = std::string(llama3.name());
  for (auto marker : llama3.markers()) o.control_tokens.emplace_back(marker);
  weft::test_support::GeneratedModel m(o);
  TestServer server(*m.file, *m.tok, weft::test_support::cpu_engine_options(1, 1, 128));
  auto c = server.client();
  const json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const Reply prompt = post(c, "/apply-template", json{{"messages", messages}});
  ASSERT_EQ(prompt.status, 200) << prompt.text;
  EXPECT_EQ(prompt.body["prompt"], llama3.render(std::vector<chat::Message>{{"user", "Hi"}}, true));
  const Reply tokens =
      post(c, "/tokenize", json{{"content", prompt.body["prompt"]}, {"add_special", true}, {"with_pieces", true}});
  EXPECT_EQ(tokens.body["tokens"][1]["piece"], "<|start_header_id|>") << tokens.text;
  const Reply r = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], tokens.body["tokens"].size());
}

// llama-server's chat_template_kwargs and reasoning_effort reach the Jinja template, in
// /apply-template and in a chat request's prompt; a bad one is a 400 naming the field.
TEST(TemplateKwargs, RequestFieldsReachTheTemplateAndBadOnesAre400) {
  weft::test_support::GeneratedModel m;
  const char* tmpl =
      "{% for m in messages %}[{{ m.content }}]{% endfor %}"
      "{% if enable_thinking %}<think>{% else %}thinking is off, answer at once{% endif %}"
      "{{ reasoning_effort | default('') }}";
  TestServer server(*m.file, *m.tok, weft::test_support::cpu_engine_options(1, 1, 128), {}, {}, tmpl);
  auto c = server.client();
  const json base = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  auto with = [&](json fields) {
    json b = base;
    b.update(fields);
    return b;
  };
  auto prompt = [&](json fields) { return post(c, "/apply-template", with(std::move(fields))); };
  EXPECT_EQ(prompt(json::object()).body["prompt"], "[Hi]<think>");  // weft's default
  const json off = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  const Reply p = prompt(off);
  ASSERT_EQ(p.status, 200) << p.text;
  EXPECT_EQ(p.body["prompt"], "[Hi]thinking is off, answer at once");
  EXPECT_EQ(prompt({{"reasoning_effort", "low"}}).body["prompt"], "[Hi]<think>low");
  EXPECT_EQ(
      prompt({{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"reasoning_effort", "high"}}}}).body["prompt"],
      "[Hi]<think>high");

  // A chat request's prompt is the same render.
  const Reply tokens = post(c, "/tokenize", json{{"content", p.body["prompt"]}, {"add_special", true}});
  const Reply r =
      post(c, "/v1/chat/completions", with({{"max_tokens", 1}, {"chat_template_kwargs", off["chat_template_kwargs"]}}));
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], tokens.body["tokens"].size());

  json many = json::object();
  for (int i = 0; i <= 64; ++i) many[fmt::format("k{}", i)] = i;
  for (const auto& [fields, message] : std::vector<std::pair<json, std::string>>{
           {{{"chat_template_kwargs", "enable_thinking"}}, "'chat_template_kwargs' must be a JSON object, got string"},
           {{{"chat_template_kwargs", {1, 2}}}, "must be a JSON object, got array"},
           {{{"reasoning_effort", 3}}, "'reasoning_effort' must be a string"},
           {{{"chat_template_kwargs", many}}, "at most 64"}}) {
    for (const char* path : {"/apply-template", "/v1/chat/completions"}) {
      const Reply bad = post(c, path, with(fields));
      EXPECT_EQ(bad.status, 400) << path << " " << fields.dump();
      EXPECT_NE(error_message(bad).find(message), std::string::npos) << bad.text;
    }
  }
}

}  // namespace
}  // namespace weft::serve::test_support
