// Test helper: `weft serve` in-process on an ephemeral loopback port, over an engine of
// in-process CPU devices, and the HTTP client side (JSON posts, server-sent events).
#pragma once

#include "chat/chat_template.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "serve/server.h"

#include "support/generated_model.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace weft::serve::test_support {

using nlohmann::json;

inline std::string stories_path() { return std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf"; }

// A model file, its tokenizer and chat format, and a server over them.
class TestServer {
 public:
  TestServer(const gguf::File& file, const tokenizer::Tokenizer& tok, const runtime::EngineOptions& eo,
             ServerOptions so = {}, runtime::SchedulerOptions sched = {}, std::string_view chat_template = "")
      : tok_(tok), chat_(chat::Template::resolve(file, chat_template)) {
    so.port = 0;
    so.slots = eo.n_seq;
    so.max_queue = sched.max_queue;
    server_ = std::make_unique<Server>(so);
    server_->start();
    engine_ = std::make_unique<runtime::Engine>(file, eo);
    scheduler_ = std::make_unique<runtime::Scheduler>(*engine_, tok, sched);
    server_->set_model({&tok_, &chat_, scheduler_.get()});
  }
  ~TestServer() {
    server_->stop();  // before what it serves from
    scheduler_.reset();
  }

  httplib::Client client(int read_timeout_s = 60) const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_connection_timeout(5);
    c.set_read_timeout(read_timeout_s);
    return c;
  }
  runtime::Scheduler& scheduler() { return *scheduler_; }
  runtime::Engine& engine() { return *engine_; }
  Server& server() { return *server_; }

 private:
  const tokenizer::Tokenizer& tok_;
  chat::Template chat_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<runtime::Scheduler> scheduler_;
};

// Tests against one server on stories260K (2 slots of 256 positions), made once per suite.
class StoriesServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(stories_path())) return;  // SetUp skips or fails each test
    file_ = gguf::File::open(stories_path()).release();
    tok_ = tokenizer::Tokenizer::from_gguf(*file_).release();
    ServerOptions so;
    so.model_name = "stories";
    server_ = new TestServer(*file_, *tok_, weft::test_support::cpu_engine_options(1, 2, 256), so);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tok_;
    delete file_;
    server_ = nullptr, tok_ = nullptr, file_ = nullptr;
  }
  void SetUp() override { WEFT_NEED_SHARED_FILE(stories_path()); }

  static inline gguf::File* file_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline TestServer* server_ = nullptr;
};

struct Reply {
  int status = 0;  // 0: no response (connection failed)
  json body;       // parsed when the body is JSON
  std::string text;
  std::string content_type, retry_after, connection;
};

inline Reply to_reply(const httplib::Result& r) {
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.content_type = r->get_header_value("Content-Type");
  out.retry_after = r->get_header_value("Retry-After");
  out.connection = r->get_header_value("Connection");
  out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

inline Reply post(httplib::Client& c, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  return to_reply(c.Post(path.c_str(), headers, body, "application/json"));
}
inline Reply post(httplib::Client& c, const std::string& path, const json& body, const httplib::Headers& headers = {}) {
  return post(c, path, body.dump(), headers);
}
inline Reply get(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  return to_reply(c.Get(path.c_str(), headers));
}

// Posts and hands the reply body to `receive` piece by piece as it arrives; receive returning
// false closes the connection (a client that leaves mid-stream).
inline httplib::Result post_streaming(httplib::Client& c, const std::string& path, const json& body,
                                      const std::function<bool(const char*, size_t)>& receive) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [receive](const char* data, size_t n, uint64_t, uint64_t) { return receive(data, n); };
  return c.send(req);
}

// The events of a server-sent event stream: each "data: X" payload, in order ("[DONE]" as is).
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = body.find("\n\n", start)) != std::string::npos; start = end + 2) {
    const std::string event = body.substr(start, end - start);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << "not a data event: " << event;
    out.push_back(event.substr(6));
  }
  EXPECT_EQ(start, body.size()) << "stream does not end with a whole event: " << body.substr(start);
  return out;
}

// Waits up to 20 s for cond.
inline bool eventually(const std::function<bool()>& cond) {
  for (int waited = 0; waited < 20000; waited += 5) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The error object's message, checking its shape: {"error": {"message", "type", "code"}}.
inline std::string error_message(const Reply& r) {
  const json& e = r.body.is_object() ? r.body.value("error", json()) : json();
  EXPECT_TRUE(e.is_object()) << "no error object in: " << r.text;
  if (!e.is_object()) return "";
  EXPECT_TRUE(e["type"].is_string()) << r.text;
  EXPECT_EQ(e["code"], r.status) << r.text;
  return e.value("message", "");
}

}  // namespace weft::serve::test_support
