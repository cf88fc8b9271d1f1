// weft serve: an OpenAI-compatible HTTP server with continuous batching over the devices of
// `weft run` (--devices, --rpc, -ts ...). It listens at once and prints the address in a line
// scripts parse ("weft serve: listening on http://HOST:PORT"); /health answers 503 until the
// model has loaded, then 200.
#include "apps/weft/commands.h"
#include "apps/weft/llama_args.h"
#include "apps/weft/model_options.h"
#include "apps/weft/run_args.h"
#include "chat/chat_template.h"
#include "core/error.h"
#include "model/model_config.h"
#include "net/handshake.h"
#include "runtime/scheduler.h"
#include "serve/server.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

namespace weft::cli {
namespace {

struct ServeArgs {
  ModelOptions model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int slots = 4;
  int max_queue = 32;
  std::string api_key, api_key_file;
  std::string chat_template, chat_template_file;
  std::string chat_template_kwargs;  // --chat-template-kwargs JSON: each request's may override a key
  std::string alias;
  size_t max_body_bytes = 8u << 20;
  std::vector<std::string> cors_origins;
};

// How long SIGTERM / SIGINT lets the requests in progress finish before the rest end with an error.
constexpr std::chrono::seconds kShutdownGrace{10};

// Takes SIGTERM and SIGINT on a thread of its own (blocked in every other thread: construct it
// before any thread starts) and shuts the server down gracefully; before the model has loaded
// there is nothing to finish, so it exits at once.
class SignalWatch {
 public:
  explicit SignalWatch(serve::Server*& server) : server_(server) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { run(); });
  }
  ~SignalWatch() { join(); }
  // Returns once a shutdown it began has finished.
  void join() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void ready() { ready_ = true; }

 private:
  void run() {
    const timespec poll{0, 100'000'000};
    while (!done_) {
      const int sig = sigtimedwait(&set_, nullptr, &poll);
      if (sig <= 0) continue;
      if (!ready_ || !server_) std::_Exit(128 + sig);
      std::fprintf(stderr, "weft serve: %s: finishing the requests in progress (up to %lld s)\n", strsignal(sig),
                   static_cast<long long>(kShutdownGrace.count()));
      server_->shutdown(kShutdownGrace);
      return;
    }
  }

  serve::Server*& server_;
  sigset_t set_;
  std::atomic<bool> done_{false}, ready_{false};
  std::thread thread_;
};

std::string file_stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

int serve(const ServeArgs& a) {
  serve::Server* running = nullptr;
  SignalWatch signals(running);
  auto file = gguf::File::open(a.model.model);
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  const std::string named =
      a.chat_template_file.empty() ? a.chat_template : read_text_file(a.chat_template_file, "--chat-template-file");
  auto tmpl = chat::Template::resolve(*file, named, chat::SpecialTokens::of(*tok));
  if (!a.chat_template_kwargs.empty()) tmpl.set_kwargs(chat::parse_template_kwargs(a.chat_template_kwargs));
  if (tmpl.fell_back()) std::fprintf(stderr, "weft serve: the model has no chat template; using chatml\n");
  runtime::EngineOptions eo = a.model.engine_options();
  // -c is the context of all slots together, as llama-server's: each slot holds its share.
  const int64_t total = a.model.ctx > 0 ? a.model.ctx : std::min<int64_t>(model::read_config(*file).n_ctx_train, 4096);
  if (total < a.slots) fail("cli", "-c {} is smaller than -np {}: each slot needs positions", total, a.slots);
  eo.n_ctx = static_cast<int32_t>(total / a.slots);
  eo.n_seq = a.slots;

  serve::ServerOptions so;
  if (a.host.empty()) fail("cli", "--host is empty: give an address to listen on, e.g. 127.0.0.1 or 0.0.0.0");
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    const auto key = net::read_key_file(a.api_key_file);
    so.api_key.assign(key.begin(), key.end());
  }
  so.model_name = a.alias.empty() ? file_stem(a.model.model) : a.alias;
  so.max_body_bytes = a.max_body_bytes;
  so.slots = a.slots;
  so.max_queue = a.max_queue;
  so.cors_origins = a.cors_origins;
  serve::Server server(so);
  server.start();
  running = &server;
  std::printf("weft serve: listening on %s\n", server.url().c_str());
  std::fflush(stdout);

  runtime::Engine engine(*file, eo);
  runtime::Scheduler scheduler(engine, *tok, {a.max_queue});
  server.set_model({tok.get(), &tmpl, &scheduler});
  std::fprintf(stderr, "weft serve: %s ready: %d slots of %d positions, %zu devices (split %s), chat template %s\n",
               so.model_name.c_str(), a.slots, eo.n_ctx, engine.devices().size(),
               std::string(parallel::split_mode_name(engine.plan().mode)).c_str(), std::string(tmpl.name()).c_str());
  signals.ready();
  server.wait();  // until a signal's shutdown stops it
  signals.join();
  server.stop();  // before the scheduler and engine it serves from go
  return 0;
}

}  // namespace

Action add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  a->model.add_to(*cmd);
  cmd->add_option("--host", a->host, "address to listen on (beyond loopback an API key is required)")
      ->capture_default_str();
  cmd->add_option("--port", a->port, "port (0: any free one; the chosen one is printed)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--parallel", a->slots, "(-np) requests decoded together, each in a KV cache slot of -c / np")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--max-queue", a->max_queue, "requests waiting for a slot; beyond them: 503 with Retry-After")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "key clients send as 'Authorization: Bearer KEY'");
  cmd->add_option("--api-key-file", a->api_key_file, "the API key from a file only its owner can read (chmod 600)");
  cmd->add_option("--cors-origin", a->cors_origins,
                  "origin of a web page allowed to call the server besides its own (repeatable; '*': any, only "
                  "with an API key)");
  cmd->add_option(
      "--chat-template", a->chat_template,
      "chat template: a name (" + chat::template_names() + ") or a Jinja template's text (default: the model's own)");
  cmd->add_option("--chat-template-file", a->chat_template_file, "a file holding the chat template (Jinja)")
      ->excludes("--chat-template");
  add_chat_template_kwargs(*cmd, a->chat_template_kwargs);
  cmd->add_option("-a,--alias", a->alias, "model name in replies and /v1/models (default: the file's name)");
  cmd->add_option("--max-body", a->max_body_bytes, "largest request body in bytes (larger: 413)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  return [a] { return serve(*a); };
}

}  // namespace weft::cli
