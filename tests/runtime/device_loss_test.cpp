// Surviving device loss (--on-device-loss replan, the default): `weft run` over workers (and a
// local CPU device) loses workers mid-generation, killed or stopped past the heartbeat bound, and
// still prints exactly what an undisturbed run prints; losing the last device, or any device with
// --on-device-loss fail, ends the run with an error naming it. Each run is watched from outside:
// a worker is killed once the run's stdout has grown past a mark, so the loss lands mid-generation.
#include "device/device_spec.h"
#include "device/worker_process.h"
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

namespace weft::runtime {
namespace {

using device::remote::testing_support::stories;
using device::remote::testing_support::Worker;
using Clock = std::chrono::steady_clock;

// Long enough that a loss lands mid-generation (about 2.4 kB of text), short enough to stay quick.
const std::vector<std::string> kRunArgs = {"--temp",           "0",          "-n",   "1000", "-c", "1024", "-p",
                                           "Once upon a time", "--net-poll", "block"};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// A `weft run` child: stdout and stderr to files of their own.
class RunChild {
 public:
  RunChild(const std::string& devices, const std::vector<std::string>& extra = {}) {
    const std::string base =
        ::testing::TempDir() + "/weft_device_loss_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++);
    out_ = base + ".out";
    err_ = base + ".err";
    std::vector<std::string> args = {WEFT_BINARY, "run", "-m", stories(), "--devices", devices};
    args.insert(args.end(), kRunArgs.begin(), kRunArgs.end());
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    WEFT_ASSERT(pid_ >= 0);
    if (pid_ == 0) {
      std::freopen(out_.c_str(), "w", stdout);
      std::freopen(err_.c_str(), "w", stderr);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
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

// What one undisturbed device prints (the reference every run below must match).
const std::string& reference() {
  static const std::string text = [] {
    RunChild r("cpu:1");
    const int status = r.finish();
    WEFT_ASSERT(status == 0);
    return r.out();
  }();
  return text;
}

// Expects the run to have finished as an undisturbed one would, after losing `lost`.
void expect_recovered(RunChild& run, const std::vector<const Worker*>& lost) {
  const int status = run.finish();
  const std::string err = run.err();
  EXPECT_EQ(status, 0) << err;
  EXPECT_EQ(run.out(), reference()) << err;
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

// Two workers and a local CPU device (one Gloo group); one worker is killed.
TEST(DeviceLoss, KilledWorkerBesideALocalDeviceIsReplannedAround) {
  reference();  // before the workers start: the runs below have the cores to themselves
  Worker w1, w2;
  RunChild run("cpu:1," + w1.url() + "," + w2.url());
  ASSERT_TRUE(run.wait_for_output(300)) << "the run ended before the kill: " << run.err();
  w2.kill(SIGKILL);
  expect_recovered(run, {&w2});
  EXPECT_NE(run.err().find("re-planned over 2 devices (split tensor): cpu:0 (ratio 1), " + w1.url()), std::string::npos)
      << run.err();
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
