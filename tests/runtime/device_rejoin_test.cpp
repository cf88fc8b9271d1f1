// Lost workers coming back, as `weft serve` meets them: every device lost leaves the engine down
// (not dead) until a worker answers again; the last loss first readmits lost workers that answer;
// a busy scheduler retries lost workers between steps; /health's view (Scheduler::health) says ok,
// degraded or down with each device's state, and notices a worker killed while idle.
#include "device/device_spec.h"
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "tokenizer/tokenizer.h"

#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <thread>

namespace weft::runtime {
namespace {

using device::remote::testing_support::stories;
using device::remote::testing_support::Worker;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = std::chrono::seconds(60);  // bound on every wait for the engine or a worker

bool wait_until(const std::function<bool()>& cond) {
  for (const auto t0 = Clock::now(); Clock::now() - t0 < kWait;) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

EngineOptions options(const std::string& devices, int32_t n_seq = 1) {
  EngineOptions o;
  o.devices = device::parse_devices(devices);
  o.mode = o.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  o.n_ctx = 256;
  o.n_seq = n_seq;
  o.n_batch = 32;
  return o;
}

// One greedy token after `prompt` in slot 0 (from its start).
Token next_token(Engine& e, const std::vector<Token>& prompt) {
  e.reset();
  model::SamplingParams greedy;
  greedy.temp = 0;
  std::mt19937_64 rng(1);
  return e.eval_and_sample(prompt, greedy, {}, rng);
}

const std::vector<Token> kPrompt = {1, 20, 30, 40, 50};

// Every device lost: the step fails, the engine is down (a step is an error, not a crash), and the
// worker restarted on its port brings it back with the same output.
TEST(DeviceRejoin, EngineDownAfterTheLastLossComesBackWithTheWorker) {
  auto f = gguf::File::open(stories());
  Worker w;
  Engine e(*f, options(w.url()));
  const Token want = next_token(e, kPrompt);
  w.kill(SIGKILL);
  EXPECT_ERROR(next_token(e, kPrompt), "no device is left to re-plan over");
  EXPECT_TRUE(e.down());
  EXPECT_EQ(e.lost_worker_names(), std::vector<std::string>{w.url()});
  EXPECT_ERROR(next_token(e, kPrompt), "no device is up");
  EXPECT_FALSE(e.rejoin_lost());  // nobody answers yet
  w.restart();
  ASSERT_TRUE(wait_until([&] { return e.rejoin_lost(); }));
  EXPECT_FALSE(e.down());
  EXPECT_EQ(e.lost_workers(), 0u);
  EXPECT_EQ(next_token(e, kPrompt), want);
}

// Lose A, restart A, lose B: the loss that leaves no device readmits A (it answers) instead of
// giving up, without --rejoin.
TEST(DeviceRejoin, LastLossReadmitsLostWorkersThatAnswer) {
  auto f = gguf::File::open(stories());
  Worker a, b;
  Engine e(*f, options(a.url() + "," + b.url()));
  const Token want = next_token(e, kPrompt);
  a.kill(SIGKILL);
  EXPECT_EQ(next_token(e, kPrompt), want);
  ASSERT_EQ(e.devices().size(), 1u);
  a.restart();
  b.kill(SIGKILL);
  EXPECT_EQ(next_token(e, kPrompt), want);
  ASSERT_EQ(e.devices().size(), 1u);
  EXPECT_EQ(e.devices()[0]->name(), a.url());
  EXPECT_EQ(e.device_losses(), 2);
}

// Keeps a scheduler busy: a few requests always waiting, so that no moment between requests is
// idle; counts the ones that failed.
class Load {
 public:
  Load(Scheduler& s, int32_t max_tokens) : s_(s), max_tokens_(max_tokens), thread_([this] { run(); }) {}
  ~Load() {
    stop_ = true;
    thread_.join();
  }
  int failed() const { return failed_; }

 private:
  void run() {
    std::vector<std::shared_ptr<Job>> jobs;
    for (int i = 0; !stop_; ++i) {
      std::erase_if(jobs, [&](const std::shared_ptr<Job>& j) {
        const JobUpdate u = j->next(0);
        if (u.error) ++failed_;
        return u.finished || u.error;
      });
      if (s_.stats().queued < 2) {
        JobRequest r;
        r.prompt = {1, static_cast<Token>(20 + i % 200), 30};
        r.max_tokens = max_tokens_;
        r.sampling.temp = 0;
        if (auto j = s_.submit(r)) jobs.push_back(std::move(j));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (auto& j : jobs) j->cancel();
  }
  Scheduler& s_;
  const int32_t max_tokens_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0};
  std::thread thread_;
};

std::string states(const Health& h) {
  std::string out = std::string(health_status_name(h.status)) + ":";
  for (const auto& d : h.devices) out += " " + d.name + "=" + std::string(device_state_name(d.state));
  return out;
}

// Under constant load: A lost, restarted, rejoins while requests keep decoding (the scheduler
// retries lost workers between steps, not only when idle); then B is lost and A carries on.
TEST(DeviceRejoin, RestartedWorkerRejoinsWhileTheSchedulerIsBusy) {
  auto f = gguf::File::open(stories());
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  Worker a, b;
  Engine e(*f, options(a.url() + "," + b.url(), 2));
  Scheduler s(e, *tok);
  EXPECT_EQ(s.health().status, HealthStatus::Ok);
  Load load(s, 64);
  ASSERT_TRUE(wait_until([&] { return s.stats().generated_tokens > 20; }));
  a.kill(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return s.health().status == HealthStatus::Degraded; })) << states(s.health());
  const Health degraded = s.health();
  ASSERT_EQ(degraded.devices.size(), 2u);
  EXPECT_EQ(degraded.devices[0].name, b.url());
  EXPECT_EQ(degraded.devices[0].state, DeviceState::Up);
  EXPECT_EQ(degraded.devices[1].name, a.url());
  EXPECT_EQ(degraded.devices[1].state, DeviceState::Lost);
  a.restart();
  const uint64_t steps_before = s.stats().steps;
  ASSERT_TRUE(wait_until([&] { return s.health().status == HealthStatus::Ok; })) << states(s.health());
  EXPECT_GT(s.stats().steps, steps_before);  // it kept decoding meanwhile
  b.kill(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return s.stats().device_losses == 2; }));
  const uint64_t tokens = s.stats().generated_tokens;
  ASSERT_TRUE(wait_until([&] { return s.stats().generated_tokens > tokens + 20; })) << states(s.health());
  EXPECT_FALSE(s.failure());
  EXPECT_EQ(load.failed(), 0);
  EXPECT_EQ(states(s.health()), "degraded: " + a.url() + "=up " + b.url() + "=lost");
}

// Idle, its only worker killed: the scheduler notices (health down, the worker lost, requests
// refused to be retried later) and comes back by itself once the worker is restarted.
TEST(DeviceRejoin, IdleSchedulerNoticesItsWorkersDeathAndRecovers) {
  auto f = gguf::File::open(stories());
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  Worker w;
  Engine e(*f, options(w.url()));
  Scheduler s(e, *tok);
  JobRequest r;
  r.prompt = kPrompt;
  r.max_tokens = 4;
  r.sampling.temp = 0;
  auto first = s.submit(r);
  ASSERT_TRUE(first);
  ASSERT_TRUE(wait_until([&] { return first->next(0).finished; }));
  EXPECT_EQ(states(s.health()), "ok: " + w.url() + "=up");
  w.kill(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return s.health().status == HealthStatus::Down; })) << states(s.health());
  const Health down = s.health();
  EXPECT_EQ(states(down), "down: " + w.url() + "=lost");
  EXPECT_TRUE(down.retrying);
  ASSERT_TRUE(down.error);
  EXPECT_NE(std::string(down.error->what()).find(w.url()), std::string::npos) << down.error->what();
  EXPECT_FALSE(s.failure());  // not for good
  EXPECT_EQ(s.submit(r), nullptr);
  w.restart();
  ASSERT_TRUE(wait_until([&] { return s.health().status == HealthStatus::Ok; })) << states(s.health());
  auto again = s.submit(r);
  ASSERT_TRUE(again);
  ASSERT_TRUE(wait_until([&] { return again->next(0).finished; }));
}

}  // namespace
}  // namespace weft::runtime
