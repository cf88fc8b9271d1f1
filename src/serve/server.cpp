#include "serve/server.h"

#include "net/socket.h"
#include "serve/chat_output.h"
#include "serve/chat_page.h"
#include "serve/generation.h"
#include "serve/http_error.h"
#include "serve/http_server.h"
#include "serve/request.h"
#include "serve/tool_call_grammar.h"

#include <httplib.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

namespace weft::serve {

using nlohmann::json;

namespace {

// Threads serving requests at most (HttpPool starts them as requests come; an idle connection
// holds none): at least 512, and always enough for every slot and queue place with spares, so
// /health, /metrics and refusals stay answerable.
constexpr int kMinHttpThreads = 512;
constexpr int kSpareThreads = 8;
constexpr int kStartTimeoutMs = 5000;
// Connections the kernel holds for accept(): httplib 0.11 listens with a backlog of 5, so a burst
// of clients overflows it and some wait out a SYN retransmission (1 s).
constexpr int kListenBacklog = 512;
// An API key guessable in fewer tries than a 128-bit one does not guard a server others can reach
// (as --api-key-file's minimum).
constexpr size_t kMinApiKeyBytes = 16;
// The most bytes of an error message a reply carries: a message may quote the request.
constexpr size_t kMaxErrorBytes = 1024;

// The POST routes that read a JSON body; a body sent anywhere else is refused unread.
const std::vector<std::string> kBodyPaths = {"/tokenize",           "/detokenize",     "/apply-template",
                                             "/completions",        "/v1/completions", "/chat/completions",
                                             "/v1/chat/completions"};

// Paths anyone may read without the API key: the chat page (it asks for the key), health and
// the model list, as llama-server has them.
bool is_public(const std::string& path) {
  return path == "/" || path == "/health" || path == "/v1/health" || path == "/models" || path == "/v1/models";
}

bool same_key(const std::string& a, const std::string& b) {  // constant time in the key's bytes
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void reply_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

std::string shorten(std::string s) {
  if (s.size() > kMaxErrorBytes) s = s.substr(0, kMaxErrorBytes) + "...";
  return s;
}

std::string bearer_token(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.compare(0, kBearer.size(), kBearer) == 0) return auth.substr(kBearer.size());
  return req.get_header_value("X-Api-Key");
}

// {"tokens": [id, ...]} or [{"id", "piece"}, ...], written out directly: a JSON tree of a body's
// worth of tokens takes some 300 bytes a token (7 MB of text: 4.8 GB at its peak).
std::string tokens_reply(const tokenizer::Tokenizer& tok, const std::vector<Token>& ids, bool with_pieces) {
  std::string out = "{\"tokens\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    if (!with_pieces) {
      out += std::to_string(ids[i]);
      continue;
    }
    out += "{\"id\":" + std::to_string(ids[i]) + ",\"piece\":";
    out += dump(json(tok.piece(ids[i], true)));
    out += '}';
  }
  return out + "]}";
}

}  // namespace

Server::Server(ServerOptions opt) : opt_(std::move(opt)) {
  if (!net::is_loopback(opt_.host)) {
    if (opt_.api_key.empty())
      fail("cli", "listening on {} beyond loopback requires --api-key or --api-key-file", opt_.host);
    if (opt_.api_key.size() < kMinApiKeyBytes)
      fail("cli", "the API key is {} bytes: listening beyond loopback needs at least {}", opt_.api_key.size(),
           kMinApiKeyBytes);
  }
  for (const auto& o : opt_.cors_origins)
    if (o == "*" && opt_.api_key.empty())
      fail("cli", "--cors-origin '*' lets every web page use the server: it requires an API key");
  const int threads = opt_.http_threads > 0 ? opt_.http_threads
                                            : std::max(kMinHttpThreads, opt_.slots + opt_.max_queue + kSpareThreads);
  http_ = std::make_unique<HttpServer>(threads);
  http_->set_payload_max_length(opt_.max_body_bytes);
  guard();
  routes();
  generation_routes();
  if (opt_.port == 0)
    port_ = http_->bind_to_any_port(opt_.host);
  else
    port_ = http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1;
  if (port_ <= 0)
    fail("serve", "cannot listen on {}:{} (in use, or not an address of this host)", opt_.host, opt_.port);
  http_->raise_backlog(kListenBacklog);
  http_->start_gate(gate_options(), [this](int status) { metrics_.count_request(status); });
}

GateOptions Server::gate_options() const {
  GateOptions g;
  g.policy.max_body_bytes = opt_.max_body_bytes;
  // With a key, the key guards the server whatever name reached it (a proxy, a LAN name).
  g.policy.check_host = opt_.api_key.empty();
  std::string host = opt_.host;
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char c) { return std::tolower(c); });
  g.policy.extra_hosts = {host};
  for (auto o : opt_.cors_origins) {
    std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
    g.policy.cors_origins.push_back(o);
  }
  g.policy.body_paths = kBodyPaths;
  g.head_timeout_ms = opt_.head_timeout_ms;
  g.max_per_address = opt_.max_waiting_per_client;
  // Leave descriptors for the model's files, workers and the connections being served.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY)
    g.max_waiting = std::clamp<size_t>(files.rlim_cur / 2, 64, g.max_waiting);
  return g;
}

Server::~Server() { stop(); }

std::string Server::url() const { return fmt::format("http://{}:{}", opt_.host, port_); }

void Server::start() {
  // A client that leaves mid-reply must not end the process: writes to its socket fail instead.
  std::signal(SIGPIPE, SIG_IGN);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  // stop() before the loop runs would be lost: wait until it does.
  for (int waited = 0; !http_->is_running(); waited += 5) {
    if (waited > kStartTimeoutMs) fail("serve", "the HTTP server did not start within {} ms", kStartTimeoutMs);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Server::set_model(const LoadedModel& m) {
  std::lock_guard lock(mu_);
  model_ = m;
  loaded_ = true;
}

void Server::stop() {
  stopping_ = true;
  http_->stop();
  wait();
  http_->close_connections();
}

void Server::shutdown(std::chrono::milliseconds grace) {
  http_->drain();
  const auto until = std::chrono::steady_clock::now() + grace;
  while (http_->in_flight() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop();  // what is still running ends with an error
}

void Server::wait() {
  std::lock_guard lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

const LoadedModel& Server::model(httplib::Response& res) const {
  std::lock_guard lock(mu_);
  if (!loaded_) {
    res.set_header("Retry-After", "1");
    reject(503, "the model is loading");
  }
  return model_;
}

void Server::guard() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // A CORS preflight never carries the key (the gate has checked its Origin).
    if (opt_.api_key.empty() || is_public(req.path) || req.method == "OPTIONS")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string key = bearer_token(req);
    if (same_key(key, opt_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    // Refused before its body was read: the connection closes after this reply (the unread bytes
    // would read as the next request), and the client must know it rather than send the next
    // request on a socket about to close.
    res.set_header("Connection", "close");
    reply_json(
        res,
        error_body(401, key.empty() ? "no API key: send the header 'Authorization: Bearer KEY'" : "invalid API key"),
        401);
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const HttpError& e) {
      reply_json(res, error_body(e.status(), shorten(e.message())), e.status());
    } catch (const std::exception& e) {
      reply_json(res, error_body(500, shorten(e.what())), 500);
    }
  });
  // httplib's own refusals (no such path, a body over the limit) come without a body.
  http_->set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        if (res.status == 404)
          message = fmt::format("no such endpoint: {} {}", req.method, req.path);
        else if (res.status == 413)
          message = fmt::format("the request body is larger than the limit of {} bytes", opt_.max_body_bytes);
        else
          message = fmt::format("the request could not be served (HTTP {})", res.status);
        reply_json(res, error_body(res.status, message), res.status);
        return httplib::Server::HandlerResponse::Handled;
      }));
  // Counted before the response is written (the post-routing handler runs after the error handler,
  // with the final status): a client that has its reply and then scrapes /metrics finds it counted,
  // where httplib's logger, which runs after the write, let one CI run's scrape come first.
  // The gate let through only origins allowed to read replies: say so to the browser.
  http_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Origin")) {
      res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin"));
      res.set_header("Vary", "Origin");
    }
    metrics_.count_request(res.status);
  });
  http_->Options(R"(.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
    res.set_header("Access-Control-Max-Age", "600");
  });
}

void Server::routes() {
  http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });
  // {"status": "ok" | "degraded" | "down", "devices": [{"name", "state": "up" | "lost"}]}; down
  // adds the error: 503 with Retry-After while lost workers are retried, 500 once it is final.
  auto health = [this](const httplib::Request&, httplib::Response& res) {
    runtime::Health h;
    {
      std::lock_guard lock(mu_);
      if (!loaded_) return reply_json(res, error_body(503, "the model is loading"), 503);
      h = model_.scheduler->health();
    }
    json devices = json::array();
    for (const auto& d : h.devices)
      devices.push_back({{"name", d.name}, {"state", runtime::device_state_name(d.state)}});
    const int status = h.status != runtime::HealthStatus::Down ? 200 : h.retrying ? 503 : 500;
    json body = status == 200 ? json::object() : error_body(status, h.error ? h.error->what() : "no device is up");
    body["status"] = runtime::health_status_name(h.status);
    body["devices"] = std::move(devices);
    if (status == 503) res.set_header("Retry-After", "1");
    reply_json(res, body, status);
  };
  auto models = [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", opt_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "weft"}};
    reply_json(res, {{"object", "list"}, {"data", json::array({m})}});
  };
  for (const char* path : {"/health", "/v1/health"}) http_->Get(path, health);
  for (const char* path : {"/models", "/v1/models"}) http_->Get(path, models);
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::optional<runtime::SchedulerStats> stats;
    {
      std::lock_guard lock(mu_);
      if (loaded_) stats = model_.scheduler->stats();
    }
    res.set_content(metrics_.render(stats ? &*stats : nullptr), "text/plain; version=0.0.4");
  });
  http_->Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const auto& m = model(res);
    const BodyJson body = parse_body(req.body);
    const json content = body.value("content", json());
    if (!content.is_string()) reject(400, "'content' must be a string");
    const auto ids = m.tok->encode(content.get<std::string>(), boolean(body, "add_special", false),
                                   boolean(body, "parse_special", true));
    res.set_content(tokens_reply(*m.tok, ids, boolean(body, "with_pieces", false)), "application/json");
  });
  http_->Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const auto& m = model(res);
    const BodyJson body = parse_body(req.body);
    reply_json(res,
               {{"content", m.tok->decode(parse_tokens(body.value("tokens", json()), "tokens", m.tok->n_vocab()))}});
  });
  http_->Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
    const auto& m = model(res);
    reply_json(res, {{"prompt", chat_prompt(*m.chat, parse_chat_request(parse_body(req.body)))}});
  });
}

void Server::generation_routes() {
  auto chat = [this](const httplib::Request& req, httplib::Response& res) {
    const auto& m = model(res);
    ChatRequest r = parse_chat_request(parse_body(req.body));
    const std::string text = chat_prompt(*m.chat, r);
    r.gen.chat_parse = chat_parse_options(*m.chat, !r.tools.tools.is_null(), text);
    if (r.tools.forced) {
      if (r.gen.grammar) reject(400, "'tool_choice' forces a call: 'response_format' cannot constrain the reply too");
      r.gen.grammar =
          forced_call_grammar(m.chat->output_format(true).tools, r.gen.chat_parse && r.gen.chat_parse->thinking_open,
                              r.tools.tools, *r.tools.forced, r.tools.parallel_tool_calls);
    }
    const auto prompt = m.tok->encode(text, /*add_special=*/true, /*parse_special=*/true);
    serve_generation({*m.scheduler, opt_.model_name, stopping_}, Endpoint::Chat, {prompt}, r.gen, req, res);
  };
  auto completion = [this](const httplib::Request& req, httplib::Response& res) {
    const auto& m = model(res);
    const CompletionRequest r = parse_completion_request(parse_body(req.body));
    std::vector<std::vector<Token>> prompts;
    for (const auto& p : r.prompts)
      prompts.push_back(std::holds_alternative<std::string>(p)
                            ? m.tok->encode(std::get<std::string>(p), /*add_special=*/true, /*parse_special=*/true)
                            : std::get<std::vector<Token>>(p));
    serve_generation({*m.scheduler, opt_.model_name, stopping_}, Endpoint::Completion, prompts, r.gen, req, res);
  };
  for (const char* path : {"/chat/completions", "/v1/chat/completions"}) http_->Post(path, chat);
  for (const char* path : {"/completions", "/v1/completions"}) http_->Post(path, completion);
}

}  // namespace weft::serve
