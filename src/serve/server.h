// `weft serve`: an OpenAI-compatible HTTP server (llama-server's endpoints and shapes) over the
// continuous-batching scheduler. It listens before the model has loaded (/health says 503 until
// then), so a script can start it and wait for it.
#pragma once

#include "chat/chat_template.h"
#include "runtime/scheduler.h"
#include "serve/metrics.h"
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace weft::serve {

class HttpServer;
struct GateOptions;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see port())
  std::string api_key;                // empty: none asked; required to listen beyond loopback
  size_t max_body_bytes = 8u << 20;   // larger request bodies are refused with 413
  std::string model_name = "weft";    // what /v1/models and replies call the model
  int http_threads = 0;               // most connections served at once; 0: max(512, slots + max_queue + 8)
  int32_t slots = 1, max_queue = 32;  // for http_threads' default
  // Origins of web pages, besides the server's own, that may call it ("https://app.example";
  // "*": any, only with an API key). Other pages' requests are refused (403).
  std::vector<std::string> cors_origins;
  int head_timeout_ms = 10000;          // a request's head must arrive within this of its first byte
  size_t max_waiting_per_client = 128;  // connections one client address may keep waiting for a head
};

// What the endpoints need once the model has loaded; it must outlive the server.
struct LoadedModel {
  const tokenizer::Tokenizer* tok = nullptr;
  const chat::Template* chat = nullptr;
  runtime::Scheduler* scheduler = nullptr;
};

class Server {
 public:
  // Binds the socket (throws weft::Error when it cannot, or when listening beyond loopback
  // without an API key).
  explicit Server(ServerOptions opt);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  std::string url() const;  // http://HOST:PORT
  // Serves on a thread of its own; until set_model, /health answers 503 (loading).
  void start();
  void set_model(const LoadedModel& m);
  // Ends the requests in progress (their jobs are cancelled; each gets an error: a 503, or a
  // stream's last event) and stops serving.
  void stop();
  // SIGTERM: refuses new requests (503), gives those in progress up to `grace` to finish, then stop().
  void shutdown(std::chrono::milliseconds grace);
  // Blocks until stop() (from another thread or a signal handler's thread).
  void wait();

 private:
  GateOptions gate_options() const;
  void guard();  // API key, errors as JSON, CORS, request counts
  void routes();
  void generation_routes();
  const LoadedModel& model(httplib::Response& res) const;  // HttpError(503) while loading

  ServerOptions opt_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  Metrics metrics_;
  mutable std::mutex mu_;
  LoadedModel model_;  // guarded by mu_ until loaded
  bool loaded_ = false;
  std::atomic<bool> stopping_{false};
  std::mutex join_mu_;
  std::thread thread_;
};

}  // namespace weft::serve
