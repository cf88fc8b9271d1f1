// Continuous batching: one thread owns the Engine and runs its steps; every request that holds a
// KV cache slot takes part in each step (its next decode token, or the next chunk of its prompt),
// so requests join and leave the batch between steps instead of waiting for each other. Requests
// beyond the slots wait in a bounded queue. Each request is a Job: the caller reads its text as it
// is generated (UTF-8 safe, stop strings cut) and may cancel it at any time.
#pragma once

#include "core/error.h"
#include "core/token.h"
#include "model/sampling.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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
};

// Stop: an end-of-generation token or a stop string; Length: max_tokens or a full context.
enum class FinishReason { Stop, Length };
std::string_view finish_reason_name(FinishReason r);  // "stop" | "length" (OpenAI's words)

struct JobUsage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // of the prompt, found in the slot's cache and not computed again
  int32_t completion_tokens = 0;  // sampled tokens, an end-of-generation token not counted
};

// What a job produced since its consumer last asked.
struct JobUpdate {
  std::string text;                 // new text
  std::vector<std::string> pieces;  // the same, as the tokens released it: one piece each, none empty
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
  void finish(FinishReason reason, std::string_view text, const JobUsage& usage);
  void fail(const Error& e);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> pieces_;  // released since the consumer last asked
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

class Scheduler {
 public:
  static constexpr double kRateWindowSeconds = 10;

  // engine and tok must outlive the scheduler; from here on only its thread touches the engine.
  Scheduler(Engine& engine, const tokenizer::Tokenizer& tok, SchedulerOptions opt = {});
  ~Scheduler();  // stops the thread; jobs still running fail saying the server stopped
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. nullptr when every slot is busy and the queue is full. Throws weft::Error
  // for a request no slot can hold (empty, or a prompt of n_ctx tokens or more) and, once a
  // device has failed, that failure.
  std::shared_ptr<Job> submit(JobRequest req);

  int32_t n_ctx() const { return n_ctx_; }  // positions of one slot
  SchedulerStats stats() const;
  // The device failure that stopped the scheduler, if any (it serves nothing more).
  std::optional<Error> failure() const;

 private:
  struct Slot;
  struct Pending {
    std::shared_ptr<Job> job;
    JobRequest req;
  };
  void loop();
  void admit();
  void drop_cancelled();
  // Between requests, at most every kRejoinInterval: lost workers that answer again rejoin.
  void retry_lost_workers();
  static constexpr std::chrono::seconds kRejoinInterval{2};
  std::chrono::steady_clock::time_point last_rejoin_try_{};
  void step();
  void on_token(Slot& s, Token t);
  void release(Slot& s);
  // The request in s ends: the slot is freed (and counted free) before its client hears the end.
  void finish(Slot& s, FinishReason reason, std::string text);
  void fail_all(const Error& e);
  void record_step(double seconds, int64_t prompt_tokens, int64_t generated_tokens);

  Engine& engine_;
  const tokenizer::Tokenizer& tok_;
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
  SchedulerStats stats_;
  struct RateSample {
    double at, seconds;
    int64_t prompt, generated;
  };
  std::deque<RateSample> window_;

  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace weft::runtime
