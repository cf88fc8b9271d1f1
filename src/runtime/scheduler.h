// Continuous batching: one thread owns the Engine and runs its steps; every request that holds a
// KV cache slot takes part in each step (its next decode token, or the next chunk of its prompt),
// so requests join and leave the batch between steps instead of waiting for each other. Requests
// beyond the slots wait in a bounded queue. Each request is a Job: the caller reads its text as it
// is generated (UTF-8 safe, stop strings cut) and may cancel it at any time.
#pragma once

#include "core/error.h"
#include "core/token.h"
#include "model/constrained_sampling.h"
#include "model/grammar.h"
#include "model/logprobs.h"
#include "model/sampling.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace weft::runtime {

struct JobRequest {
  std::vector<Token> prompt;
  int32_t max_tokens = -1;  // < 0: until the slot's context is full
  model::SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (not part of the returned text)
  // >= 0: each generated token's log-probability and its top_logprobs alternatives
  // (0..model::kMaxTopLogprobs); -1: none.
  int32_t top_logprobs = -1;
  // Only output this grammar derives (response_format, a GBNF grammar): the request ends where
  // nothing but the end can follow, and fails where no token of the vocabulary continues it.
  std::shared_ptr<const model::Grammar> grammar;
};

// Stop: an end-of-generation token or a stop string; Length: max_tokens or a full context.
enum class FinishReason { Stop, Length };
std::string_view finish_reason_name(FinishReason r);  // "stop" | "length" (OpenAI's words)

struct JobUsage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // of the prompt, found in the slot's cache and not computed again
  int32_t completion_tokens = 0;  // sampled tokens, an end-of-generation token not counted
};

// A token's log-probability as a reply shows it: its text is the tokenizer's piece (bytes, not
// always whole UTF-8 characters).
struct PieceProb {
  Token id = -1;
  std::string piece;
  double logprob = 0;
};
struct PieceLogprobs {  // one generated token's (model::TokenLogprobs with the pieces)
  PieceProb sampled;
  std::vector<PieceProb> top;
};

// What a job produced since its consumer last asked.
struct JobUpdate {
  std::string text;                 // new text
  std::vector<std::string> pieces;  // the same, as the tokens released it: one piece each, none empty
  // top_logprobs >= 0: per piece, the log-probabilities of the tokens whose text it completes (a
  // token whose text is held back, an unfinished UTF-8 sequence, counts with the piece releasing
  // it). The tokens of a stop string and an end-of-generation token have none.
  std::vector<std::vector<PieceLogprobs>> piece_logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::Length;  // finished: why
  JobUsage usage;                              // so far
  std::optional<Error> error;                  // the job failed (a device died): nothing more comes
};

// One request, shared by its consumer (an HTTP handler) and the scheduler thread.
class Job {
 public:
  // Waits up to timeout_ms for news and returns it (nothing new: empty text, not finished).
  JobUpdate next(int timeout_ms);
  // Frees the job's slot (or queue place) before the scheduler's next step; nothing more comes.
  void cancel();
  bool cancelled() const;

 private:
  friend class Scheduler;
  void publish(std::string_view text, const JobUsage& usage);  // scheduler thread
  void add_logprobs(PieceLogprobs lp);                         // a token's, counted with the next piece published
  void finish(FinishReason reason, std::string_view text, const JobUsage& usage);
  void fail(const Error& e);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> pieces_;                         // released since the consumer last asked
  std::vector<std::vector<PieceLogprobs>> piece_logprobs_;  // per piece of pieces_ (if asked)
  std::vector<PieceLogprobs> unreleased_logprobs_;          // of tokens whose text is held
  void add_piece(std::string_view text);                    // under mu_
  JobUsage usage_;
  bool changed_ = false, finished_ = false, cancelled_ = false;
  FinishReason reason_ = FinishReason::Length;
  std::optional<Error> error_;
};

struct SchedulerOptions {
  int32_t max_queue = 32;  // requests waiting for a slot; more are refused (submit returns null)
};

struct DeviceTimes {
  std::string name;
  double compute_seconds = 0;     // inside its ops
  double collective_seconds = 0;  // inside collectives, waiting for peers included
};

struct SchedulerStats {
  int32_t slots = 0, busy_slots = 0, queued = 0;
  uint64_t steps = 0, prompt_tokens = 0, generated_tokens = 0;  // since start
  // Tokens per second of stepping (idle time not counted) over the last kRateWindowSeconds.
  double prompt_tokens_per_second = 0, generated_tokens_per_second = 0;
  std::vector<DeviceTimes> devices;  // the live ones
  uint64_t device_losses = 0;        // devices dropped and re-planned around (Engine::device_losses)
};

// What /health reports. Ok: every device is up. Degraded: serving, with some workers lost (retried).
// Down: serving nothing: every device lost (requests are refused until a lost worker answers again),
// or a failure that stopped the scheduler for good.
enum class HealthStatus { Ok, Degraded, Down };
std::string_view health_status_name(HealthStatus s);  // "ok" | "degraded" | "down"
enum class DeviceState { Up, Lost };
std::string_view device_state_name(DeviceState s);  // "up" | "lost"
struct DeviceHealth {
  std::string name;
  DeviceState state = DeviceState::Up;
};
struct Health {
  HealthStatus status = HealthStatus::Ok;
  std::vector<DeviceHealth> devices;  // the live ones, then the lost workers
  std::optional<Error> error;         // Down: why (the loss of the last device, or the failure)
  bool retrying = false;              // Down: lost workers are retried (every kRejoinInterval)
};

class Scheduler {
 public:
  static constexpr double kRateWindowSeconds = 10;

  // engine and tok must outlive the scheduler; from here on only its thread touches the engine.
  Scheduler(Engine& engine, const tokenizer::Tokenizer& tok, SchedulerOptions opt = {});
  ~Scheduler();  // stops the thread; jobs still running fail saying the server stopped
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. nullptr when every slot is busy and the queue is full, or while no device is
  // up (every one lost, the lost workers being retried): either way, retry later. Throws
  // weft::Error for a request no slot can hold (empty, or a prompt of n_ctx tokens or more) or
  // whose sampling parameters the sampler cannot use (model::validate), and, once the scheduler
  // has stopped for good (see failure), that failure.
  std::shared_ptr<Job> submit(JobRequest req);

  int32_t n_ctx() const { return n_ctx_; }  // positions of one slot
  SchedulerStats stats() const;
  Health health() const;
  // The failure that stopped the scheduler for good, if any (it serves nothing more): a device
  // failure under --on-device-loss fail, or the last device lost with no worker to retry.
  std::optional<Error> failure() const;

  // How often lost workers are probed (idle, busy or down) and an idle scheduler looks for dead
  // devices. Busy, the probe runs beside the steps; only a worker that answered costs a step's
  // time (its reload and the replay).
  static constexpr std::chrono::seconds kRejoinInterval{2};

 private:
  struct Slot;
  struct Pending {
    std::shared_ptr<Job> job;
    JobRequest req;
  };
  void loop();
  void admit();
  void drop_cancelled();
  // At a step boundary: an idle engine's dead devices are re-planned around, and at most every
  // kRejoinInterval the lost workers are probed (beside the steps while busy); those that answer
  // rejoin.
  void between_steps();
  void retry_lost_workers();
  std::chrono::steady_clock::time_point last_rejoin_try_{};
  std::future<bool> probe_;  // whether a lost worker answered (scheduler thread only)
  // An error of the engine out of a step or a rejoin. Every device lost with workers to retry: the
  // requests in flight fail, and the scheduler goes on, down (true). Otherwise it stops (false).
  bool on_engine_error(const Error& e);
  void publish_devices();  // the live devices and lost workers, for stats() and health()
  void step();
  void on_token(Slot& s, const SeqOutput& out);
  void release(Slot& s);
  // The request in s ends: the slot is freed (and counted free) before its client hears the end.
  void finish(Slot& s, FinishReason reason, std::string text);
  // Fails every job, running and queued; `stop`: for good (failure()).
  void fail_all(const Error& e, bool stop = true);
  void record_step(double seconds, int64_t prompt_tokens, int64_t generated_tokens);

  Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  std::shared_ptr<const model::TokenTexts> texts_;  // every token's bytes, made for the first grammar
  const SchedulerOptions opt_;
  const int32_t n_ctx_;
  std::vector<std::unique_ptr<Slot>> slots_;  // scheduler thread only
  std::vector<Slot*> order_;                  // busy slots in the order they were admitted

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  int32_t busy_ = 0;
  bool stop_ = false;
  std::optional<Error> failure_;
  std::optional<Error> down_;            // every device lost (why), while the lost workers are retried
  std::vector<std::string> lost_names_;  // the lost workers
  SchedulerStats stats_;
  struct RateSample {
    double at, seconds;
    int64_t prompt, generated;
  };
  std::deque<RateSample> window_;

  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace weft::runtime
