// Surviving device loss (--on-device-loss replan, the default): `weft run` over workers (and a
// local CPU device) loses workers during load, at the prompt and mid-generation, killed or stopped
// past the heartbeat bound, and still prints exactly what an undisturbed run prints; losing the last
// device, or any device with --on-device-loss fail, ends the run with an error naming it, and so
// does a worker that cannot be reached at start-up. Each run is watched from outside: a worker is
// killed once the run's output (or the worker's log) shows the moment meant.
#include "device/device_spec.h"
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <thread>

namespace weft::runtime {
namespace {

using device::remote::testing_support::stories;
using device::remote::testing_support::Worker;
using Clock = std::chrono::steady_clock;

// Long enough that a loss lands mid-generation (about 2.4 kB of text), short enough to stay quick.
const std::vector<std::string> kRunArgs = {"--temp",           "0",          "-n",   "1000", "-c", "1024", "-p",
                                           "Once upon a time", "--net-poll", "block"};

// kRunArgs for 400 tokens (~975 bytes), for runs that go on over a tensor split of 4 devices: those
// add their f32 partial sums in another order than one device, and where two logits are that close
// the greedy tokens part. At the avx2 and avxvnni levels a 4-device split parts from one device at
// byte 1397 of kRunArgs' 2437 (2 and 3 devices, and every split at avx512 and ref, not at all).
std::vector<std::string> short_run_args() {
  std::vector<std::string> args = kRunArgs;
  args[3] = "400";
  return args;
}

// A prompt of about 750 tokens read two at a time: 375 steps, long enough that a worker killed once
// every worker has reported its load dies while the prompt is being read.
std::vector<std::string> long_prompt_args() {
  std::string prompt;
  for (int i = 0; i < 30; ++i)
    prompt += "Once upon a time there was a little girl named Lily. She liked to play in the park. ";
  return {"--temp", "0", "-n", "32", "-c", "1024", "-b", "2", "-p", prompt, "--net-poll", "block"};
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// A `weft run` child: stdout and stderr to files of their own.
class RunChild {
 public:
  // `args`: the run's flags after the model and devices (kRunArgs unless told).
  explicit RunChild(const std::string& devices, const std::vector<std::string>& extra = {},
                    const std::vector<std::string>& args = kRunArgs) {
    const std::string base =
        ::testing::TempDir() + "/weft_device_loss_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++);
    out_ = base + ".out";
    err_ = base + ".err";
    std::vector<std::string> argv_s = {WEFT_BINARY, "run", "-m", stories(), "--devices", devices};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    argv_s.insert(argv_s.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    WEFT_ASSERT(pid_ >= 0);
    if (pid_ == 0) {
      std::freopen(out_.c_str(), "w", stdout);
      std::freopen(err_.c_str(), "w", stderr);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(WEFT_BINARY, argv.data());
      ::_exit(127);
    }
  }
  ~RunChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(out_);
    std::filesystem::remove(err_);
  }
  RunChild(const RunChild&) = delete;
  RunChild& operator=(const RunChild&) = delete;

  // Waits until stdout holds `bytes` bytes; false if the run ended first (or a minute passed).
  bool wait_for_output(size_t bytes) {
    for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(60);) {
      std::error_code ec;
      if (std::filesystem::file_size(out_, ec) >= bytes && !ec) return running();
      if (!running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  // Waits until stderr says `needle` `times` times; false if the run ended first (or a minute passed).
  bool wait_for_err(const std::string& needle, int times) {
    for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(60);) {
      const std::string e = err();
      int seen = 0;
      for (size_t at = e.find(needle); at != std::string::npos; at = e.find(needle, at + 1)) ++seen;
      if (seen >= times) return running();
      if (!running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    status_ = status;
    pid_ = -1;
    return false;
  }
  // The exit status (after waiting up to two minutes: a bound, not a timing assertion), or -1.
  int finish() {
    for (const auto t0 = Clock::now(); running() && Clock::now() - t0 < std::chrono::minutes(2);)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running()) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  std::string out() const { return read_all(out_); }
  std::string err() const { return read_all(err_); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  int status_ = 0;
  std::string out_, err_;
};

// What one undisturbed device prints with `args` (the reference every run below must match).
const std::string& reference(const std::vector<std::string>& args = kRunArgs) {
  static std::map<std::vector<std::string>, std::string> texts;
  auto it = texts.find(args);
  if (it == texts.end()) {
    RunChild r("cpu:1", {}, args);
    const int status = r.finish();
    WEFT_ASSERT(status == 0);
    it = texts.emplace(args, r.out()).first;
  }
  return it->second;
}

// Expects the run (with `args`) to have finished as an undisturbed one would, after losing `lost`.
void expect_recovered(RunChild& run, const std::vector<const Worker*>& lost,
                      const std::vector<std::string>& args = kRunArgs) {
  const int status = run.finish();
  const std::string err = run.err();
  EXPECT_EQ(status, 0) << err;
  EXPECT_EQ(run.out(), reference(args)) << err;
  for (const Worker* w : lost) EXPECT_NE(err.find("lost device " + w->url()), std::string::npos) << err;
  EXPECT_NE(err.find("re-planned over"), std::string::npos) << err;
  EXPECT_NE(err.find("recovered in"), std::string::npos) << err;
}

// Expects the run to have ended with an error (not to be hanging) that says `needle`; returns its stderr.
std::string expect_failed(RunChild& run, const std::string& needle) {
  const int status = run.finish();
  const std::string err = run.err();
  EXPECT_NE(status, -1) << "still running: " << err;
  EXPECT_NE(status, 0) << err;
  EXPECT_NE(err.find(needle), std::string::npos) << err;
  return err;
}

TEST(DeviceLoss, ReferenceIsLongEnoughToLoseDevicesMidGeneration) {
  EXPECT_GT(reference().size(), 1500u);  // the marks below lie inside the generation
}

// The tokens a recovery replayed, from its report ("recovered in 35 ms (12 tokens of ...)"); -1 if none.
int replayed_tokens(const std::string& err) {
  const size_t at = err.find("recovered in ");
  const size_t open = err.find(" (", at);
  if (at == std::string::npos || open == std::string::npos) return -1;
  return std::stoi(err.substr(open + 2));
}

// The prompt's tokens, from the run's timings ("prompt: 350 tokens in ..."); -1 if none.
int prompt_tokens(const std::string& err) {
  const size_t at = err.find("prompt: ");
  return at == std::string::npos ? -1 : std::stoi(err.substr(at + 8));
}

// Waits until the worker logging to `log` has found its weights (it is loading, held there by
// --test-load-delay-ms); false if the run ended first (or a minute passed).
bool loading(RunChild& run, const std::string& log) {
  for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::minutes(1);) {
    if (read_all(log).find("weft worker: weights of") != std::string::npos) return run.running();
    if (!run.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// When the worker dies.
enum class Moment { Load, Prompt, Generation };

struct LossCase {
  int n_workers;
  Moment when;
};

std::string loss_case_name(const ::testing::TestParamInfo<LossCase>& param) {
  constexpr const char* kWhen[] = {"AtLoad", "AtPrompt", "MidGeneration"};
  return fmt::format("{}Workers{}", param.param.n_workers, kWhen[static_cast<int>(param.param.when)]);
}

class KilledWorker : public ::testing::TestWithParam<LossCase> {};

// N workers and a local CPU device (one Gloo group); the last worker is killed while it loads
// (slowed by the hidden load delay, killed once it has found its weights), while the prompt is read
// (once the run reports every worker loaded), or mid-generation.
TEST_P(KilledWorker, IsReplannedAroundBesideALocalDevice) {
  const auto [n_workers, when] = GetParam();
  const std::vector<std::string> args = when == Moment::Prompt ? long_prompt_args() : short_run_args();
  reference(args);  // before the workers start: the runs below have the cores to themselves
  const std::string log = ::testing::TempDir() + "/weft_device_loss_worker_" + std::to_string(::getpid());
  std::vector<std::unique_ptr<Worker>> workers;
  std::string devices = "cpu:1";
  for (int i = 0; i < n_workers; ++i) {
    const bool victim = i == n_workers - 1;
    std::vector<std::string> extra;
    if (victim && when == Moment::Load) extra = {"--test-load-delay-ms", "60000"};  // killed long before
    workers.push_back(std::make_unique<Worker>(extra, "127.0.0.1", std::vector<std::string>{}, victim ? log : ""));
    devices += "," + workers.back()->url();
  }
  Worker& victim = *workers.back();
  RunChild run(devices, {}, args);
  switch (when) {
    case Moment::Load:
      ASSERT_TRUE(loading(run, log)) << "the run ended first: " << run.err();
      ASSERT_EQ(run.err().find(victim.url() + ": loaded in"), std::string::npos)
          << "loaded before the kill: " << run.err();
      break;
    case Moment::Prompt:
      // Each worker reports its load ("tcp://...: loaded in 0.0 s"); the local device loads meanwhile.
      ASSERT_TRUE(run.wait_for_err(": loaded in ", n_workers)) << "the run ended before the kill: " << run.err();
      break;
    case Moment::Generation:
      ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the kill: " << run.err();
      break;
  }
  victim.kill(SIGKILL);
  std::filesystem::remove(log);
  expect_recovered(run, {&victim}, args);
  const std::string err = run.err();
  EXPECT_NE(err.find(fmt::format("re-planned over {} devices (split tensor): cpu:0 (ratio 1), {}", n_workers,
                                 workers.front()->url())),
            std::string::npos)
      << err;
  // Where the loss landed, from what the recovery replayed: nothing yet, part of the prompt, more.
  const int replayed = replayed_tokens(err), prompt = prompt_tokens(err);
  ASSERT_GT(prompt, 0) << err;
  ASSERT_GE(replayed, 0) << err;
  switch (when) {
    case Moment::Load: EXPECT_EQ(replayed, 0) << err; break;
    case Moment::Prompt: EXPECT_LT(replayed, prompt) << "the loss came after the prompt: " << err; break;
    case Moment::Generation: EXPECT_GT(replayed, prompt) << err; break;
  }
}

INSTANTIATE_TEST_SUITE_P(DeviceLoss, KilledWorker,
                         ::testing::Values(LossCase{2, Moment::Generation}, LossCase{3, Moment::Generation},
                                           LossCase{4, Moment::Generation}, LossCase{2, Moment::Prompt},
                                           LossCase{3, Moment::Prompt}, LossCase{4, Moment::Prompt},
                                           LossCase{2, Moment::Load}, LossCase{3, Moment::Load},
                                           LossCase{4, Moment::Load}),
                         loss_case_name);

// A worker that cannot be reached at start-up (a mistyped address, say) is an error, not a loss:
// the run never starts without it.
TEST(DeviceLoss, UnreachableWorkerAtStartIsAnError) {
  Worker w1, gone;
  gone.kill(SIGKILL);  // its port is closed now
  RunChild run("cpu:1," + w1.url() + "," + gone.url());
  const std::string err = expect_failed(run, gone.address());
  EXPECT_EQ(err.find("re-planned"), std::string::npos) << err;
  EXPECT_EQ(run.out(), "");
}

// Under --on-device-loss fail a worker lost during load ends the run, naming it.
TEST(DeviceLoss, FailPolicyEndsTheRunOnALossDuringLoad) {
  const std::string log = ::testing::TempDir() + "/weft_device_loss_fail_worker_" + std::to_string(::getpid());
  Worker w1, w2({"--test-load-delay-ms", "60000"}, "127.0.0.1", {}, log);
  RunChild run("cpu:1," + w1.url() + "," + w2.url(), {"--on-device-loss", "fail"});
  ASSERT_TRUE(loading(run, log)) << "the run ended first: " << run.err();
  w2.kill(SIGKILL);
  std::filesystem::remove(log);
  const std::string err = expect_failed(run, w2.url());
  EXPECT_EQ(err.find("re-planned"), std::string::npos) << err;
}

// Three workers and a local device lose the workers one after another, down to the local device.
TEST(DeviceLoss, LosingDevicesUntilOneRemainsKeepsTheOutput) {
  reference();
  Worker w1, w2, w3;
  RunChild run(w1.url() + "," + w2.url() + ",cpu:1," + w3.url());
  size_t mark = 200;
  for (Worker* w : {&w2, &w1, &w3}) {
    ASSERT_TRUE(run.wait_for_output(mark)) << "the run ended before killing " << w->url() << ": " << run.err();
    w->kill(SIGKILL);
    mark += 400;  // the next loss after the run has recovered and gone on
  }
  expect_recovered(run, {&w1, &w2, &w3});
  EXPECT_NE(run.err().find("re-planned over 1 device (split none): cpu:0"), std::string::npos) << run.err();
}

// --exact: three workers (four devices with the local one, where plain f32 sums part from one
// device at some kernel levels, see short_run_args), one killed mid-generation: the re-planned run
// prints one device's text byte for byte, all 1000 tokens.
TEST(DeviceLoss, ExactRunKeepsOneDevicesTextThroughALoss) {
  std::vector<std::string> args = kRunArgs;
  args.push_back("--exact");
  reference(args);
  Worker w1, w2, w3;
  RunChild run("cpu:1," + w1.url() + "," + w2.url() + "," + w3.url(), {}, args);
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the kill: " << run.err();
  w3.kill(SIGKILL);
  expect_recovered(run, {&w3}, args);
}

// --exact with re-plans forced every 8 steps (--rebalance, no lag or change asked) over three
// in-process devices of uneven ratios: one device's text, whatever ratios the re-plans chose.
TEST(DeviceLoss, ExactRunKeepsOneDevicesTextThroughRebalancing) {
  std::vector<std::string> args = kRunArgs;
  args.push_back("--exact");
  const std::string& want = reference(args);
  RunChild run(
      "cpu:1,cpu:1,cpu:1",
      {"-ts", "5,1,2", "--rebalance", "--rebalance-window", "8", "--rebalance-lag", "0", "--rebalance-min-change", "0"},
      args);
  EXPECT_EQ(run.finish(), 0) << run.err();
  EXPECT_EQ(run.out(), want) << run.err();
  EXPECT_NE(run.err().find("[engine] rebalance: "), std::string::npos) << run.err();
}

// A worker that stops answering without closing its connection (its host down): dropped once it
// has been silent past the heartbeat bound.
TEST(DeviceLoss, SilentWorkerIsReplannedAround) {
  reference();
  Worker w1, w2;
  RunChild run(w1.url() + "," + w2.url());
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the stop: " << run.err();
  w2.kill(SIGSTOP);
  expect_recovered(run, {&w2});
  EXPECT_NE(run.err().find("heartbeat"), std::string::npos) << run.err();
  w2.kill(SIGKILL);
}

// Both workers die at once: the second is found gone when the first is re-planned around, and
// with none left the run ends with an error naming the loss.
TEST(DeviceLoss, LosingTheLastDeviceIsAnError) {
  reference();
  Worker w1, w2;
  RunChild run(w1.url() + "," + w2.url());
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the kill: " << run.err();
  w1.kill(SIGKILL);
  w2.kill(SIGKILL);
  expect_failed(run, "no device is left to re-plan over");
  EXPECT_TRUE(reference().starts_with(run.out())) << "its output departs from the reference";
}

TEST(DeviceLoss, FailPolicyEndsTheRunNamingTheDevice) {
  reference();
  Worker w1, w2;
  RunChild run(w1.url() + "," + w2.url(), {"--on-device-loss", "fail"});
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the kill: " << run.err();
  w1.kill(SIGKILL);
  const std::string err = expect_failed(run, w1.url());
  EXPECT_EQ(err.find("re-planned"), std::string::npos) << err;
}

// --rejoin: a worker lost and restarted on its port is used again at the next re-plan (here the
// loss of the other worker), and the output is still the undisturbed one.
TEST(DeviceLoss, RestartedWorkerRejoinsAtTheNextReplan) {
  reference();
  Worker w1, w2;
  RunChild run("cpu:1," + w1.url() + "," + w2.url(), {"--rejoin"});
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the first kill: " << run.err();
  w2.kill(SIGKILL);
  for (const auto t0 = Clock::now(); run.err().find("recovered in") == std::string::npos;) {
    ASSERT_TRUE(run.running() && Clock::now() - t0 < std::chrono::minutes(1)) << run.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  w2.restart();
  ASSERT_TRUE(run.wait_for_output(900)) << "the run ended before the second kill: " << run.err();
  w1.kill(SIGKILL);
  expect_recovered(run, {&w2, &w1});
  const std::string err = run.err();
  EXPECT_NE(err.find("rejoined " + w2.url()), std::string::npos) << err;
  EXPECT_NE(err.find("re-planned over 2 devices (split tensor): cpu:0 (ratio 1), " + w2.url()), std::string::npos)
      << err;
}

// Three slots decoded together, as `weft serve` steps them: all prompts in the first step, then one
// token per slot per step; slot 2 starts a new prompt at step 4 (its cache cut back to nothing).
// `after_step(i)` runs after step i. Returns each slot's greedy tokens.
std::vector<std::vector<Token>> decode_three(Engine& e, const std::function<void(int)>& after_step) {
  const std::vector<std::vector<Token>> prompts = {{1, 20, 30, 40, 50}, {1, 300, 12}, {1, 7, 8, 9, 10, 11, 400}};
  const std::vector<Token> restart = {1, 99, 98};
  std::vector<std::vector<Token>> feed = prompts, out(3);
  model::SamplingParams greedy;
  greedy.temp = 0;
  for (int step = 0; step < 16; ++step) {
    if (step == 4) {
      e.truncate(2, 0);
      feed[2] = restart;
    }
    std::vector<SeqStep> batch(3);
    for (int32_t k = 0; k < 3; ++k) {
      batch[k].seq = k;
      batch[k].tokens = feed[k];
      batch[k].sample = true;
      batch[k].sampling = greedy;
    }
    const std::vector<SeqOutput> r = e.step_batch(batch);
    for (size_t k = 0; k < 3; ++k) {
      out[k].push_back(r[k].token);
      feed[k] = {r[k].token};
    }
    after_step(step);
  }
  return out;
}

EngineOptions batched_options(const std::string& devices) {
  EngineOptions o;
  o.devices = device::parse_devices(devices);
  o.mode = o.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  o.n_ctx = 64;
  o.n_seq = 3;
  o.n_batch = 16;  // the replay (34 tokens) takes three steps, slots packed together and cut
  return o;
}

// In process: the engine re-plans around a worker killed between steps and every slot goes on as
// on one device.
TEST(DeviceLoss, BatchedSlotsAreReplayedAfterALoss) {
  auto f = gguf::File::open(stories());
  Engine one(*f, batched_options("cpu:1"));
  const auto ref = decode_three(one, [](int) {});
  Worker w1, w2;
  Engine e(*f, batched_options("cpu:1," + w1.url() + "," + w2.url()));
  const auto got = decode_three(e, [&](int step) {
    if (step == 9) w1.kill(SIGKILL);
  });
  for (size_t k = 0; k < ref.size(); ++k) EXPECT_EQ(got[k], ref[k]) << "slot " << k;
  EXPECT_NE(ref[0], ref[1]);  // the slots differ: each was replayed into its own
  EXPECT_EQ(e.device_losses(), 1);
  ASSERT_EQ(e.devices().size(), 2u);
  EXPECT_EQ(e.devices()[1]->name(), w2.url());
}

}  // namespace
}  // namespace weft::runtime
