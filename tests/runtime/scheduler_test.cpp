// The continuous-batching scheduler: requests decoded together give what each gives alone, end
// for the right reason with the right counts, and a full queue, a cancellation and bad prompts
// behave as stated.
#include "runtime/scheduler.h"

#include "runtime/generate.h"

#include "support/expect_error.h"
#include "support/generated_model.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace weft::runtime {
namespace {

using test_support::cpu_engine_options;
using test_support::GeneratedModel;

constexpr int kWaitMs = 20000;  // bound on any wait for a job in these tests

struct Result {
  std::string text;
  std::vector<std::string> pieces;
  FinishReason reason = FinishReason::Length;
  JobUsage usage;
  std::optional<Error> error;
};

// Reads a job to its end (or kWaitMs).
Result collect(Job& job) {
  Result r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (std::chrono::steady_clock::now() < deadline) {
    JobUpdate u = job.next(100);
    r.text += u.text;
    r.pieces.insert(r.pieces.end(), u.pieces.begin(), u.pieces.end());
    r.usage = u.usage;
    if (u.error) {
      r.error = u.error;
      return r;
    }
    if (u.finished) {
      r.reason = u.reason;
      return r;
    }
  }
  ADD_FAILURE() << "job did not finish within " << kWaitMs << " ms";
  return r;
}

JobRequest greedy(std::vector<Token> prompt, int max_tokens) {
  JobRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temp = 0;
  return r;
}

// Distinct prompts: BOS and a few ids that differ per request.
std::vector<Token> prompt_of(int i, int len = 6) {
  std::vector<Token> p = {1};
  for (int k = 0; k < len; ++k) p.push_back(static_cast<Token>(3 + (i * 37 + k * 11) % 300));
  return p;
}

bool wait_until(const std::function<bool()>& cond) {
  for (int waited = 0; waited < kWaitMs; waited += 5) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(Scheduler, OneJobGivesTheTextOfTheGenerationLoop) {
  GeneratedModel m;
  std::string expected;
  {
    Engine e(*m.file, cpu_engine_options(1, 1, 128));
    model::SamplingParams p;
    p.temp = 0;
    expected = generate(e, m.tok.get(), prompt_of(0), 16, p).text;
  }
  Engine engine(*m.file, cpu_engine_options(1, 2, 128));
  Scheduler s(engine, *m.tok);
  const Result r = collect(*s.submit(greedy(prompt_of(0), 16)));
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.text, expected);
  EXPECT_EQ(r.usage.prompt_tokens, 7);
  EXPECT_FALSE(r.text.empty());
}

// Batch invariance: 8 requests at once (more than the slots: some wait in the queue) give the
// greedy text each gives alone, whatever the number of devices.
class SchedulerDevices : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerDevices, ConcurrentRequestsGiveWhatEachGivesAlone) {
  GeneratedModel m;
  constexpr int kJobs = 8;
  std::vector<std::string> alone;
  {
    Engine engine(*m.file, cpu_engine_options(GetParam(), 1, 64, 16));
    Scheduler s(engine, *m.tok);
    for (int i = 0; i < kJobs; ++i) {
      const Result r = collect(*s.submit(greedy(prompt_of(i, 4 + i * 3), 10)));
      ASSERT_FALSE(r.error) << r.error->what();
      alone.push_back(r.text);
    }
  }
  Engine engine(*m.file, cpu_engine_options(GetParam(), 3, 64, 16));
  Scheduler s(engine, *m.tok);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < kJobs; ++i) jobs.push_back(s.submit(greedy(prompt_of(i, 4 + i * 3), 10)));
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(jobs[i]);
    const Result r = collect(*jobs[i]);
    ASSERT_FALSE(r.error) << r.error->what();
    EXPECT_EQ(r.text, alone[i]) << "request " << i;
  }
  EXPECT_NE(alone[0], alone[1]);  // the prompts do lead to different texts
}

INSTANTIATE_TEST_SUITE_P(Devices, SchedulerDevices, ::testing::Values(1, 2, 3));

TEST(Scheduler, MaxTokensEndsWithLength) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(1, 1, 128));
  Scheduler s(engine, *m.tok);
  const Result r = collect(*s.submit(greedy(prompt_of(1), 5)));
  EXPECT_EQ(r.reason, FinishReason::Length);
  EXPECT_EQ(r.usage.completion_tokens, 5);
  const auto stats = s.stats();
  EXPECT_EQ(stats.generated_tokens, 5u);
  EXPECT_EQ(stats.prompt_tokens, 7u);
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_EQ(stats.devices[0].name, engine.devices()[0]->name());
  EXPECT_GT(stats.devices[0].compute_seconds, 0);
  const Result none = collect(*s.submit(greedy(prompt_of(2), 0)));  // nothing asked, nothing computed
  EXPECT_EQ(none.reason, FinishReason::Length);
  EXPECT_EQ(none.usage.completion_tokens, 0);
  EXPECT_EQ(none.text, "");
  EXPECT_EQ(s.stats().steps, stats.steps);
}

// stories260K's greedy continuation of "Once upon a time" is ", there was a little girl named
// Lily. She loved to play outside in the park. ..." (SOURCES.txt).
class SchedulerStories : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";
    WEFT_NEED_SHARED_FILE(path);
    file_ = gguf::File::open(path);
    tok_ = tokenizer::Tokenizer::from_gguf(*file_);
  }
  std::vector<Token> once() const { return tok_->encode("Once upon a time", true); }
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(SchedulerStories, StopStringEndsTheTextBeforeIt) {
  Engine engine(*file_, cpu_engine_options(1, 1, 128));
  Scheduler s(engine, *tok_);
  JobRequest req = greedy(once(), 40);
  req.stop = {"Lily", "never appears"};
  const Result r = collect(*s.submit(req));
  EXPECT_EQ(r.reason, FinishReason::Stop);
  EXPECT_EQ(r.text, ", there was a little girl named ");
}

// A stream sends one event per piece: every token whose text is whole gives its own.
TEST_F(SchedulerStories, EachTokenReleasesOnePiece) {
  Engine engine(*file_, cpu_engine_options(1, 1, 128));
  Scheduler s(engine, *tok_);
  const Result r = collect(*s.submit(greedy(once(), 12)));
  EXPECT_EQ(r.usage.completion_tokens, 12);
  ASSERT_EQ(r.pieces.size(), 12u) << r.text;
  EXPECT_EQ(r.pieces[0], ",");
  EXPECT_EQ(r.pieces[1], " there");
  std::string joined;
  for (const auto& piece : r.pieces) joined += piece;
  EXPECT_EQ(joined, r.text);
}

TEST_F(SchedulerStories, FullContextEndsWithLength) {
  Engine engine(*file_, cpu_engine_options(1, 1, 16));
  Scheduler s(engine, *tok_);
  const Result r = collect(*s.submit(greedy(once(), -1)));
  EXPECT_EQ(r.reason, FinishReason::Length);
  // The prompt's 5 positions, then one per token fed back; the last token drawn is not fed.
  EXPECT_EQ(r.usage.completion_tokens, 16 - 5 + 1);
  EXPECT_EQ(r.text.rfind(", there was a little girl named Lily.", 0), 0u) << r.text;
}

TEST_F(SchedulerStories, RepeatedPromptIsFoundInTheSlotCache) {
  Engine engine(*file_, cpu_engine_options(1, 2, 128));
  Scheduler s(engine, *tok_);
  const Result first = collect(*s.submit(greedy(once(), 12)));
  const Result again = collect(*s.submit(greedy(once(), 12)));
  EXPECT_EQ(first.usage.cached_tokens, 0);
  EXPECT_EQ(again.usage.cached_tokens, 4);  // all but the last prompt token, fed again to draw
  EXPECT_EQ(again.text, first.text);
}

// A model with room for a generation far longer than any test waits: a cancelled job cannot
// have ended on its own.
GeneratedModel long_context_model() {
  tools::GenModelOptions o;
  o.n_ctx = 8192;
  return GeneratedModel(o);
}

TEST(Scheduler, FullQueueRefusesAndCancelFreesTheSlotOrQueuePlace) {
  const GeneratedModel m = long_context_model();
  Engine engine(*m.file, cpu_engine_options(1, 1, 8192));
  Scheduler s(engine, *m.tok, {.max_queue = 2});
  auto running = s.submit(greedy(prompt_of(1), -1));
  auto waiting = s.submit(greedy(prompt_of(2), 4));
  auto given_up = s.submit(greedy(prompt_of(3), 4));
  ASSERT_TRUE(running && waiting && given_up);
  EXPECT_EQ(s.submit(greedy(prompt_of(4), 4)), nullptr);
  ASSERT_TRUE(wait_until([&] { return s.stats().generated_tokens > 0; }));
  EXPECT_EQ(s.stats().queued, 2);
  given_up->cancel();
  EXPECT_TRUE(wait_until([&] { return s.stats().queued == 1; }));
  running->cancel();
  const Result r = collect(*waiting);
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.usage.completion_tokens, 4);
  EXPECT_TRUE(wait_until([&] { return s.stats().busy_slots == 0 && s.stats().queued == 0; }));
  const JobUpdate u = running->next(0);
  EXPECT_FALSE(u.finished);  // dropped, not run to its end
  EXPECT_LT(u.usage.completion_tokens, 8000);
  EXPECT_EQ(given_up->next(0).usage.completion_tokens, 0);  // never started
}

TEST(Scheduler, PromptsNoSlotCanHoldAreErrors) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(1, 2, 32));
  Scheduler s(engine, *m.tok);
  EXPECT_ERROR(s.submit(greedy({}, 4)), "the prompt is empty");
  EXPECT_ERROR(s.submit(greedy(std::vector<Token>(32, 5), 4)), "the prompt has 32 tokens, a slot holds 32 positions");
  EXPECT_ERROR(s.submit(greedy({1, 100000}, 4)), "token id 100000 is outside the vocabulary (0..319)");
  EXPECT_ERROR(s.submit(greedy({1, -1}, 4)), "token id -1");
}

// A request whose sampling parameters the sampler cannot use (repeat_penalty 0 passed the HTTP
// range check) is refused at submission, naming the parameter; it never reaches the devices, so no
// device counts as lost and the next request is served.
TEST(Scheduler, UnusableSamplingIsRefusedAndNoDeviceIsLost) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(2, 2, 64));
  Scheduler s(engine, *m.tok);
  JobRequest bad = greedy(prompt_of(0), 4);
  bad.sampling.repeat_penalty = 0;
  EXPECT_ERROR(s.submit(bad), "repeat_penalty 0 is outside");
  bad.sampling.repeat_penalty = NAN;
  EXPECT_ERROR(s.submit(bad), "repeat_penalty nan");
  const Result r = collect(*s.submit(greedy(prompt_of(1), 4)));
  EXPECT_FALSE(r.error) << r.error->what();
  EXPECT_EQ(r.usage.completion_tokens, 4);
  EXPECT_FALSE(s.failure());
  EXPECT_EQ(engine.device_losses(), 0);
  EXPECT_EQ(engine.devices().size(), 2u);
  EXPECT_EQ(s.health().status, HealthStatus::Ok);
}

// The engine's own check: a batch whose one sequence asks for unusable sampling fails before
// anything runs, as that sequence's error (SequenceError names its entry), never as a device loss;
// the same step without it runs.
TEST(Scheduler, UnusableSamplingInABatchFailsThatSequenceOnly) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(2, 2, 64));
  const std::vector<Token> a = prompt_of(0), b = prompt_of(1);
  std::mt19937_64 rng(1);
  std::vector<SeqStep> batch(2);
  for (int32_t k = 0; k < 2; ++k) {
    batch[k].seq = k;
    batch[k].tokens = k == 0 ? a : b;
    batch[k].sample = true;
    batch[k].sampling.temp = 0;
    batch[k].recent = batch[k].tokens;
    batch[k].rng = &rng;
  }
  batch[1].sampling.repeat_penalty = static_cast<float>(1e-46);  // 0 as a float
  try {
    engine.step_batch(batch);
    ADD_FAILURE() << "the step ran";
  } catch (const SequenceError& e) {
    EXPECT_EQ(e.index(), 1u);
    EXPECT_NE(std::string(e.what()).find("repeat_penalty"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.device_losses(), 0);
  EXPECT_EQ(engine.n_past(0), 0);  // nothing ran
  batch.pop_back();
  EXPECT_EQ(engine.step_batch(batch).size(), 1u);
  EXPECT_EQ(engine.devices().size(), 2u);
}

TEST(Scheduler, MoreSlotsThanABatchIsRefused) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(1, 4, 32, 2));
  EXPECT_ERROR(Scheduler(engine, *m.tok), "-np 4 slots cannot all decode in one step of -b 2 tokens");
}

}  // namespace
}  // namespace weft::runtime
