#include "serve/generation.h"

#include "serve/chat_output.h"
#include "serve/client_watch.h"
#include "serve/connection_stream.h"
#include "serve/http_error.h"

#include <memory>
#include <optional>
#include <utility>

namespace weft::serve {

namespace {

// How often a handler waiting for tokens looks at its client and at the server stopping.
constexpr int kPollMs = 50;
// httplib writes a response even to a client that left; this status only shows in the counts.
constexpr int kClientGone = 499;

// The jobs of one request (one per prompt) and what each has produced so far.
class Run {
 public:
  struct Part {
    std::shared_ptr<runtime::Job> job;
    std::vector<std::string> pieces;  // produced, not yet sent (streaming) or all of it (whole reply)
    std::vector<std::vector<runtime::PieceLogprobs>> piece_logprobs;  // one per piece (empty: not asked)
    size_t sent_bytes = 0;                                            // streaming: text sent so far
    runtime::JobUsage usage;
    bool started = false, finished = false, finish_sent = false;
    runtime::FinishReason reason = runtime::FinishReason::Length;
    std::optional<ChatDeltas> deltas;                     // streaming a split chat reply (gen.chat_parse)
    std::vector<runtime::PieceLogprobs> unsent_logprobs;  // of tokens whose text the split holds
  };

  Run(const GenerationContext& ctx, const httplib::Request& req)
      : ctx_(ctx), watch_(connection_fd(), req.version == "HTTP/1.1") {}
  ~Run() { cancel(); }

  void submit(const std::vector<std::vector<Token>>& prompts, const GenerationParams& gen, httplib::Response& res) {
    for (const auto& p : prompts) {
      std::shared_ptr<runtime::Job> job;
      try {
        runtime::JobRequest jr{p, gen.max_tokens, gen.sampling, gen.stop};
        jr.top_logprobs = gen.top_logprobs;
        jr.grammar = gen.grammar;
        job = ctx_.scheduler.submit(std::move(jr));
      } catch (const Error& e) {
        if (ctx_.scheduler.failure()) reject(500, "{}", e.what());
        reject(400, "{}", e.message());
      }
      if (!job) {
        res.set_header("Retry-After", "1");
        const runtime::Health h = ctx_.scheduler.health();
        if (h.status == runtime::HealthStatus::Down)
          reject(503, "no device is up ({}); lost workers are retried, retry later",
                 h.error ? h.error->what() : "every device was lost");
        reject(503, "every slot is busy and the queue of waiting requests is full; retry later");
      }
      parts_.push_back({std::move(job)});
    }
  }

  // Waits up to kPollMs for news from the jobs. False when the request is to end early: the
  // client left or the server is stopping (the jobs are cancelled then).
  bool pump() {
    bool news = false;
    for (auto& p : parts_)
      if (!p.finished && !error_) news |= absorb(p, p.job->next(0));
    if (!news)
      for (auto& p : parts_)
        if (!p.finished) {
          absorb(p, p.job->next(kPollMs));
          break;
        }
    if (watch_.gone(streaming_) || ctx_.stopping) {
      cancel();
      return false;
    }
    return true;
  }

  bool all(bool Part::*flag) const {
    for (const auto& p : parts_)
      if (!(p.*flag)) return false;
    return true;
  }
  const std::optional<Error>& error() const { return error_; }
  bool stopping() const { return ctx_.stopping; }
  void set_streaming() { streaming_ = true; }
  std::vector<Part>& parts() { return parts_; }
  runtime::JobUsage usage() const {
    runtime::JobUsage u;
    for (const auto& p : parts_) add_usage(u, p.usage);
    return u;
  }
  void cancel() {
    for (auto& p : parts_)
      if (!p.finished) p.job->cancel();
  }

 private:
  bool absorb(Part& p, runtime::JobUpdate u) {
    for (auto& piece : u.pieces) p.pieces.push_back(std::move(piece));
    for (auto& lp : u.piece_logprobs) p.piece_logprobs.push_back(std::move(lp));
    p.usage = u.usage;
    if (u.error) error_ = u.error;
    p.finished = u.finished;
    p.reason = u.reason;
    p.started = p.started || u.finished || u.error || u.usage.completion_tokens > 0;
    return !u.text.empty() || u.finished || u.error;
  }

  GenerationContext ctx_;  // a copy: a stream outlives the handler that started it
  ClientWatch watch_;
  std::vector<Part> parts_;
  std::optional<Error> error_;
  bool streaming_ = false;  // the reply's status and headers are sent
};

constexpr const char* kStopping = "the server is shutting down";

// A split chat reply's new pieces as the deltas the parse now decides (chat_output.h): text that
// may yet start a tool call or end reasoning waits for the pieces that decide it. Log-probabilities
// ride on the next content delta (the last chunk's, when none follows).
template <class Send>
bool send_split(Run::Part& p, size_t index, const Reply& reply, const GenerationParams& gen,
                const std::vector<std::string>& pieces,
                const std::vector<std::vector<runtime::PieceLogprobs>>& logprobs, Send& send) {
  if (!p.deltas) p.deltas.emplace(*gen.chat_parse, gen.parallel_tool_calls);
  std::string text;
  for (const auto& piece : pieces) text += piece;
  if (gen.top_logprobs >= 0)
    for (const auto& lp : logprobs) p.unsent_logprobs.insert(p.unsent_logprobs.end(), lp.begin(), lp.end());
  const bool last = p.finished && !p.finish_sent;
  if (text.empty() && !last) return true;
  bool ok = true;
  for (auto& d : p.deltas->push(text, last)) {
    const bool with = d.contains("content") && !p.unsent_logprobs.empty();
    ok = ok && send(sse_event(with ? reply.text_chunk(index, d["content"], &p.unsent_logprobs)
                                   : reply.delta_chunk(index, std::move(d))));
    if (with) p.unsent_logprobs.clear();
  }
  if (ok && last && !p.unsent_logprobs.empty()) ok = send(sse_event(reply.text_chunk(index, "", &p.unsent_logprobs)));
  return ok;
}

// Streams the rest of a run whose every job has started: deltas as they come, each choice's
// finish, the usage when asked for, then [DONE].
bool stream(Run& run, const Reply& reply, Endpoint kind, const GenerationParams& gen, httplib::DataSink& sink) {
  auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
  auto& parts = run.parts();
  run.set_streaming();
  bool ok = true;
  if (kind == Endpoint::Chat)
    for (size_t i = 0; i < parts.size(); ++i) ok = ok && send(sse_event(reply.role_chunk(i)));
  while (ok) {
    for (size_t i = 0; i < parts.size() && ok; ++i) {
      auto& p = parts[i];
      // One event per token's text, as it was released, however many came since the last write,
      // with the log-probabilities of the tokens it completes when asked for.
      auto pieces = std::exchange(p.pieces, {});
      const auto logprobs = std::exchange(p.piece_logprobs, {});
      if (gen.chat_parse) ok = send_split(p, i, reply, gen, std::exchange(pieces, {}), logprobs, send);
      for (size_t k = 0; k < pieces.size() && ok; ++k) {
        const bool with = gen.top_logprobs >= 0 && k < logprobs.size();
        ok = send(sse_event(reply.text_chunk(i, pieces[k], with ? &logprobs[k] : nullptr, p.sent_bytes)));
        p.sent_bytes += pieces[k].size();
      }
      if (ok && p.finished && !p.finish_sent) {
        ok = send(sse_event(reply.finish_chunk(i, p.reason, p.deltas && p.deltas->has_tool_calls())));
        p.finish_sent = true;
      }
    }
    if (!ok) break;
    if (run.error()) {  // the status was sent long ago: the stream ends with the error as its last event
      send(sse_event(error_body(500, run.error()->what())));
      sink.done();
      return true;
    }
    if (run.all(&Run::Part::finished)) {
      if (gen.include_usage) send(sse_event(reply.usage_chunk(run.usage())));
      send(kSseDone);
      sink.done();
      return true;
    }
    ok = run.pump();
  }
  run.cancel();
  if (run.stopping()) {  // the client is still there: it learns why its stream ends
    send(sse_event(error_body(503, kStopping)));
    sink.done();
    return true;
  }
  return false;
}

}  // namespace

void serve_generation(const GenerationContext& ctx, Endpoint kind, const std::vector<std::vector<Token>>& prompts,
                      const GenerationParams& gen, const httplib::Request& req, httplib::Response& res) {
  auto run = std::make_shared<Run>(ctx, req);
  run->submit(prompts, gen, res);
  bool Run::Part::*wait_for = gen.stream ? &Run::Part::started : &Run::Part::finished;
  while (!run->all(wait_for) && !run->error())
    if (!run->pump()) {
      if (run->stopping()) reject(503, "{}", kStopping);
      res.status = kClientGone;
      return;
    }
  if (run->error()) reject(500, "{}", run->error()->what());
  auto reply = std::make_shared<Reply>(kind, ctx.model_name);
  if (!gen.stream) {
    std::vector<Choice> choices;
    for (const auto& p : run->parts()) {
      std::string text;
      for (const auto& piece : p.pieces) text += piece;
      choices.push_back({std::move(text), p.reason});
      if (gen.chat_parse)
        choices.back().message =
            chat_message(chat::parse_output(choices.back().text, *gen.chat_parse), gen.parallel_tool_calls);
      if (gen.top_logprobs >= 0) {
        auto& all = choices.back().logprobs.emplace();
        for (const auto& lp : p.piece_logprobs) all.insert(all.end(), lp.begin(), lp.end());
      }
    }
    res.set_content(dump(reply->whole(choices, run->usage())), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [run, reply, kind, gen](size_t, httplib::DataSink& sink) {
    return stream(*run, *reply, kind, gen, sink);
  });
}

}  // namespace weft::serve
