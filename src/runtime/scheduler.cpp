#include "runtime/scheduler.h"

#include "runtime/device_loss.h"
#include "runtime/generate.h"
#include "runtime/text_stream.h"
#include "runtime/token_texts.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

namespace weft::runtime {

using Clock = std::chrono::steady_clock;

std::string_view finish_reason_name(FinishReason r) { return r == FinishReason::Stop ? "stop" : "length"; }

std::string_view health_status_name(HealthStatus s) {
  switch (s) {
    case HealthStatus::Ok: return "ok";
    case HealthStatus::Degraded: return "degraded";
    case HealthStatus::Down: return "down";
  }
  return "down";
}

std::string_view device_state_name(DeviceState s) { return s == DeviceState::Up ? "up" : "lost"; }

// ---- Job: the consumer's side ----

JobUpdate Job::next(int timeout_ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changed_ || finished_ || error_; });
  JobUpdate u;
  u.pieces = std::exchange(pieces_, {});
  u.piece_logprobs = std::exchange(piece_logprobs_, {});
  for (const auto& piece : u.pieces) u.text += piece;
  u.finished = finished_;
  u.reason = reason_;
  u.usage = usage_;
  u.error = error_;
  changed_ = false;
  return u;
}

void Job::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool Job::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void Job::add_piece(std::string_view text) {
  if (text.empty()) return;
  pieces_.emplace_back(text);
  piece_logprobs_.push_back(std::exchange(unreleased_logprobs_, {}));
}

void Job::add_logprobs(PieceLogprobs lp) {
  std::lock_guard lock(mu_);
  unreleased_logprobs_.push_back(std::move(lp));
}

void Job::publish(std::string_view text, const JobUsage& usage) {
  {
    std::lock_guard lock(mu_);
    add_piece(text);
    usage_ = usage;
    changed_ = true;
  }
  cv_.notify_all();
}

void Job::finish(FinishReason reason, std::string_view text, const JobUsage& usage) {
  {
    std::lock_guard lock(mu_);
    add_piece(text);
    usage_ = usage;
    reason_ = reason;
    finished_ = true;
  }
  cv_.notify_all();
}

void Job::fail(const Error& e) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    error_ = e;
  }
  cv_.notify_all();
}

// ---- Scheduler ----

// One KV cache slot and the request it serves (scheduler thread only).
struct Scheduler::Slot {
  int32_t seq = 0;
  std::vector<Token> cached;  // the tokens in this slot's cache, position by position
  std::shared_ptr<Job> job;   // null: free
  JobRequest req;
  std::optional<TextStream> text;
  std::mt19937_64 rng;
  std::vector<Token> history;  // prompt + generated: what the penalties look at
  size_t n_prompt_fed = 0;     // prompt tokens in the cache
  Token next = -1;             // sampled, to be fed in the next step
  JobUsage usage;
  std::optional<model::GrammarConstraint> constraint;  // req.grammar and where the output stands in it

  bool decoding() const { return n_prompt_fed == req.prompt.size(); }
  std::span<const Token> recent() const {
    const int32_t n = req.sampling.repeat_last_n;
    const size_t k = n < 0 ? history.size() : std::min<size_t>(history.size(), n);
    return std::span<const Token>(history).last(k);
  }
};

Scheduler::Scheduler(Engine& engine, const tokenizer::Tokenizer& tok, SchedulerOptions opt)
    : engine_(engine), tok_(tok), opt_(opt), n_ctx_(engine.n_ctx()) {
  if (engine.n_seq() < 1) fail("scheduler", "no KV cache slots (-np {})", engine.n_seq());
  if (engine.n_seq() > engine.n_batch())
    fail("scheduler", "-np {} slots cannot all decode in one step of -b {} tokens", engine.n_seq(), engine.n_batch());
  if (opt_.max_queue < 0) fail("scheduler", "queue size {} is negative", opt_.max_queue);
  for (int32_t i = 0; i < engine.n_seq(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->seq = i;
  }
  stats_.slots = engine.n_seq();
  for (const auto& d : engine.devices()) stats_.devices.push_back({d->name(), 0, 0});
  lost_names_ = engine.lost_worker_names();  // lost while the engine loaded
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  fail_all(Error("scheduler", "the server stopped before the request finished"));
}

std::shared_ptr<Job> Scheduler::submit(JobRequest req) {
  if (req.prompt.empty()) fail("scheduler", "the prompt is empty");
  if (static_cast<int64_t>(req.prompt.size()) >= n_ctx_)
    fail("scheduler", "the prompt has {} tokens, a slot holds {} positions (-c divided among -np slots)",
         req.prompt.size(), n_ctx_);
  for (Token t : req.prompt)
    if (t < 0 || t >= tok_.n_vocab())
      fail("scheduler", "token id {} is outside the vocabulary (0..{})", t, tok_.n_vocab() - 1);
  model::validate(req.sampling);  // here, not on the devices: a bad request is no device failure
  if (req.top_logprobs < -1 || req.top_logprobs > model::kMaxTopLogprobs)
    fail("scheduler", "top_logprobs {} is outside 0..{}", req.top_logprobs, model::kMaxTopLogprobs);
  auto job = std::make_shared<Job>();
  {
    std::lock_guard lock(mu_);
    if (failure_) throw *failure_;
    if (stop_) fail("scheduler", "the server is stopping");
    if (down_) return nullptr;  // until a lost worker is back
    const int64_t free_slots = stats_.slots - busy_;
    if (static_cast<int64_t>(queue_.size()) >= free_slots + opt_.max_queue) return nullptr;
    queue_.push_back({job, std::move(req)});
  }
  cv_.notify_all();
  return job;
}

std::optional<Error> Scheduler::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

Health Scheduler::health() const {
  std::lock_guard lock(mu_);
  Health h;
  for (const auto& d : stats_.devices) h.devices.push_back({d.name, DeviceState::Up});
  for (const auto& name : lost_names_) h.devices.push_back({name, DeviceState::Lost});
  if (failure_ || down_) {
    h.status = HealthStatus::Down;
    h.error = failure_ ? failure_ : down_;
    h.retrying = !failure_;
  } else if (!lost_names_.empty()) {
    h.status = HealthStatus::Degraded;
  }
  return h;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = stats_;
  s.busy_slots = busy_;
  s.queued = static_cast<int32_t>(queue_.size());
  double seconds = 0;
  int64_t prompt = 0, generated = 0;
  for (const auto& r : window_) seconds += r.seconds, prompt += r.prompt, generated += r.generated;
  if (seconds > 0) {
    s.prompt_tokens_per_second = prompt / seconds;
    s.generated_tokens_per_second = generated / seconds;
  }
  return s;
}

namespace {
// Each live device's times so far (devices loaded afresh by a re-plan start from zero).
std::vector<DeviceTimes> device_times(Engine& engine) {
  std::vector<DeviceTimes> devices;
  for (const auto& d : engine.devices()) {
    const device::DeviceStats ds = d->stats();
    devices.push_back(
        {d->name(), std::accumulate(ds.op_seconds.begin(), ds.op_seconds.end(), 0.0), ds.collective_seconds});
  }
  return devices;
}
}  // namespace

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Idle, it wakes now and then to look at the devices and retry lost workers.
      cv_.wait_for(lock, kRejoinInterval, [&] { return stop_ || !queue_.empty() || !order_.empty(); });
      if (stop_) return;
    }
    try {
      between_steps();
      drop_cancelled();
      admit();
      if (!order_.empty()) step();
    } catch (const Error& e) {
      if (!on_engine_error(e)) return;
    } catch (const std::exception& e) {
      fail_all(Error("scheduler", e.what()));
      return;
    }
  }
}

void Scheduler::between_steps() {
  if (order_.empty() && !engine_.down()) {
    const int losses = engine_.device_losses();
    engine_.check_idle_devices();
    if (engine_.device_losses() != losses) publish_devices();
  }
  retry_lost_workers();
}

void Scheduler::retry_lost_workers() {
  if (engine_.lost_workers() == 0) return;
  if (!probe_.valid()) {
    if (Clock::now() - last_rejoin_try_ < kRejoinInterval) return;
    last_rejoin_try_ = Clock::now();
    probe_ = std::async(std::launch::async,
                        [lost = engine_.lost_worker_specs()] { return std::ranges::any_of(lost, answers); });
  }
  // Busy, the steps go on while the probe waits for its answers; idle or down, it is waited for
  // (bounded by the probe's timeouts).
  if (!order_.empty() && probe_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  if (!probe_.get() || !engine_.rejoin_lost()) return;
  {
    std::lock_guard lock(mu_);
    down_.reset();
  }
  // Shown at once (/metrics' weft_devices, /health), not only after the next request's first step.
  publish_devices();
}

bool Scheduler::on_engine_error(const Error& e) {
  if (!engine_.down() || engine_.lost_workers() == 0) {
    fail_all(e);
    return false;
  }
  {
    std::lock_guard lock(mu_);
    down_ = e;
  }
  publish_devices();
  fail_all(e, /*stop=*/false);
  return true;
}

void Scheduler::publish_devices() {
  std::vector<DeviceTimes> devices = device_times(engine_);
  std::vector<std::string> lost = engine_.lost_worker_names();
  std::lock_guard lock(mu_);
  stats_.devices = std::move(devices);
  stats_.device_losses = static_cast<uint64_t>(engine_.device_losses());
  lost_names_ = std::move(lost);
}

// Frees the slots of cancelled jobs and forgets cancelled requests still queued.
void Scheduler::drop_cancelled() {
  for (Slot* s : std::vector<Slot*>(order_))
    if (s->job->cancelled()) release(*s);
  std::lock_guard lock(mu_);
  std::erase_if(queue_, [](const Pending& p) { return p.job->cancelled(); });
}

// Moves queued requests into free slots, each into the slot whose cache shares the longest
// prefix with its prompt (a conversation's next turn finds its earlier turns still there).
void Scheduler::admit() {
  for (;;) {
    Pending p;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty() || busy_ == stats_.slots) return;
      p = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    // The slot that can continue the furthest into the prompt (then the one sharing most with it):
    // at least its last token is fed again, its step drawing the first token, and a slot continues
    // only as far as its sliding-window layers still hold the keys and its recurrent state or a
    // checkpoint of it was kept (Engine::resumable).
    Slot* best = nullptr;
    size_t keep = 0, best_common = 0;
    for (auto& s : slots_) {
      if (s->job) continue;
      const auto [a, b] = std::mismatch(s->cached.begin(), s->cached.end(), p.req.prompt.begin(), p.req.prompt.end());
      const auto common = static_cast<size_t>(a - s->cached.begin());
      const auto k = static_cast<size_t>(
          engine_.resumable(s->seq, static_cast<int32_t>(std::min(common, p.req.prompt.size() - 1))));
      if (!best || std::pair(k, common) > std::pair(keep, best_common)) best = s.get(), keep = k, best_common = common;
    }
    Slot& s = *best;
    engine_.truncate(s.seq, static_cast<int32_t>(keep));
    s.cached.resize(keep);
    s.job = std::move(p.job);
    s.req = std::move(p.req);
    s.text.emplace(tok_, s.req.stop);
    s.rng.seed(resolve_seed(s.req.sampling.seed));
    s.history = s.req.prompt;
    s.n_prompt_fed = keep;
    s.next = -1;
    s.constraint.reset();
    if (s.req.grammar) {
      if (!texts_) texts_ = token_texts(tok_);
      s.constraint.emplace(s.req.grammar, texts_);
    }
    s.usage = {static_cast<int32_t>(s.req.prompt.size()), static_cast<int32_t>(keep), 0};
    order_.push_back(&s);
    if (s.req.max_tokens == 0) finish(s, FinishReason::Length, "");
  }
}

// One engine step: the next token of every decoding slot, then prompt chunks of the others (in
// the order they arrived) in what is left of n_batch. Decoding slots come first so that a long
// prompt never holds back the requests already generating.
void Scheduler::step() {
  std::vector<SeqStep> batch;
  std::vector<Slot*> who;
  int64_t budget = engine_.n_batch(), n_prompt = 0;
  auto add = [&](Slot* s, std::span<const Token> tokens, bool sample) {  // what a slot's request asks of a step
    batch.push_back({s->seq, tokens, sample, false, s->req.sampling, s->recent(), &s->rng});
    batch.back().top_logprobs = s->req.top_logprobs;
    batch.back().constraint = s->constraint ? &*s->constraint : nullptr;
    who.push_back(s);
  };
  for (Slot* s : order_) {
    if (!s->decoding()) continue;
    add(s, std::span<const Token>(&s->next, 1), true);
    --budget;
  }
  for (Slot* s : order_) {
    if (s->decoding() || budget <= 0) continue;
    const auto rest = std::span<const Token>(s->req.prompt).subspan(s->n_prompt_fed);
    // A recurrent model's prompt is cut where its state is kept for the conversation's next turn.
    const Engine::PromptChunk c =
        engine_.prompt_chunk(s->seq, static_cast<int32_t>(s->n_prompt_fed), static_cast<int32_t>(s->req.prompt.size()),
                             std::min<size_t>(rest.size(), budget));
    const auto chunk = rest.first(c.n);
    add(s, chunk, chunk.size() == rest.size());  // the prompt's last chunk draws the first token
    batch.back().checkpoint = c.checkpoint;
    budget -= static_cast<int64_t>(chunk.size());
    n_prompt += static_cast<int64_t>(chunk.size());
  }
  const auto t0 = Clock::now();
  std::vector<SeqOutput> out;
  try {
    out = engine_.step_batch(batch);
  } catch (const SequenceError& e) {  // nothing ran: that request fails, the others step next time
    Slot& s = *who[e.index()];
    const std::shared_ptr<Job> job = s.job;
    release(s);
    job->fail(e);
    return;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Counted before any job hears of its token, so a finished job's tokens are in the stats.
  record_step(seconds, n_prompt, std::ranges::count_if(batch, [](const SeqStep& b) { return b.sample; }));
  for (size_t i = 0; i < batch.size(); ++i) {
    Slot& s = *who[i];
    s.cached.insert(s.cached.end(), batch[i].tokens.begin(), batch[i].tokens.end());
    if (!s.decoding()) s.n_prompt_fed += batch[i].tokens.size();
    if (batch[i].sample) on_token(s, out[i]);
  }
}

void Scheduler::on_token(Slot& s, const SeqOutput& out) {
  if (!out.error.empty()) {  // its grammar: nothing in the vocabulary continues the output
    const std::shared_ptr<Job> job = s.job;
    release(s);
    return job->fail(Error("grammar", out.error));
  }
  const Token t = out.token;
  if (s.constraint) s.constraint->accept(t);
  if (tok_.is_eog(t)) return finish(s, FinishReason::Stop, s.text->finish());
  ++s.usage.completion_tokens;
  s.history.push_back(t);
  if (s.text->push(t)) return finish(s, FinishReason::Stop, s.text->take());
  if (out.logprobs) {  // not a stop string's token: its text is cut
    auto with_piece = [&](const model::TokenLogprob& p) { return PieceProb{p.id, tok_.piece(p.id), p.logprob}; };
    PieceLogprobs lp{with_piece(out.logprobs->sampled), {}};
    for (const auto& p : out.logprobs->top) lp.top.push_back(with_piece(p));
    s.job->add_logprobs(std::move(lp));
  }
  const bool limit = s.req.max_tokens >= 0 && s.usage.completion_tokens >= s.req.max_tokens;
  if (limit || engine_.n_past(s.seq) >= n_ctx_)  // a full context: no room to feed t back
    return finish(s, FinishReason::Length, s.text->finish());
  if (s.constraint && s.constraint->finished())  // nothing but the end can follow
    return finish(s, FinishReason::Stop, s.text->finish());
  s.next = t;
  s.job->publish(s.text->take(), s.usage);
}

// The slot keeps its cache (cached) for a later request with the same beginning.
void Scheduler::release(Slot& s) {
  s.job.reset();
  s.text.reset();
  std::erase(order_, &s);
  std::lock_guard lock(mu_);
  --busy_;
}

void Scheduler::finish(Slot& s, FinishReason reason, std::string text) {
  const std::shared_ptr<Job> job = s.job;
  const JobUsage usage = s.usage;
  release(s);  // first: a client that asks /metrics as soon as its reply ends sees the slot free
  job->finish(reason, text, usage);
}

void Scheduler::fail_all(const Error& e, bool stop) {
  std::deque<Pending> queued;
  {
    std::lock_guard lock(mu_);
    if (stop && !failure_ && !stop_) failure_ = e;
    queued.swap(queue_);
  }
  for (Slot* s : std::vector<Slot*>(order_)) {
    s->job->fail(e);
    release(*s);
  }
  for (auto& p : queued) p.job->fail(e);
}

void Scheduler::record_step(double seconds, int64_t prompt_tokens, int64_t generated_tokens) {
  publish_devices();
  const double now = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  std::lock_guard lock(mu_);
  ++stats_.steps;
  stats_.prompt_tokens += prompt_tokens;
  stats_.generated_tokens += generated_tokens;
  window_.push_back({now, seconds, prompt_tokens, generated_tokens});
  while (!window_.empty() && window_.front().at < now - kRateWindowSeconds) window_.pop_front();
}

}  // namespace weft::runtime
