// Log-probabilities through the scheduler: each released piece carries the tokens whose text it
// completes (a token whose text is held, part of a UTF-8 character or of a possible stop string,
// counts with the piece that releases it), the tokens' pieces are the text, a stop string's
// tokens carry none, and asking for them changes nothing that is drawn.
#include "runtime/scheduler.h"

#include "support/expect_error.h"
#include "support/generated_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace weft::runtime {
namespace {

using test_support::cpu_engine_options;
using test_support::GeneratedModel;

constexpr int kWaitMs = 20000;  // bound on any wait for a job

struct Logged {
  std::string text;
  size_t pieces = 0;
  std::vector<PieceLogprobs> logprobs;  // every piece's, in order
  JobUsage usage;
  FinishReason reason = FinishReason::Length;
};

Logged run(Scheduler& s, int32_t top, std::vector<std::string> stop = {}) {
  JobRequest r;
  r.prompt = {1, 17, 42, 99};
  r.max_tokens = 24;
  r.sampling.temp = 0.9f;  // drawn, not the argmax: the seed fixes it
  r.sampling.seed = 5;
  r.stop = std::move(stop);
  r.top_logprobs = top;
  auto job = s.submit(r);
  Logged l;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (std::chrono::steady_clock::now() < deadline) {
    JobUpdate u = job->next(100);
    EXPECT_EQ(u.piece_logprobs.size(), u.pieces.size());
    l.text += u.text;
    l.pieces += u.pieces.size();
    for (auto& lp : u.piece_logprobs) l.logprobs.insert(l.logprobs.end(), lp.begin(), lp.end());
    l.usage = u.usage;
    if (u.finished) {
      l.reason = u.reason;
      return l;
    }
  }
  ADD_FAILURE() << "job did not finish";
  return l;
}

std::string joined(const std::vector<PieceLogprobs>& lp) {
  std::string s;
  for (const auto& t : lp) s += t.sampled.piece;
  return s;
}

TEST(SchedulerLogprobs, PiecesCarryTheirTokensAndAStopStringsTokensNone) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(1, 1, 128));
  Scheduler s(engine, *m.tok);
  const Logged plain = run(s, -1);
  EXPECT_TRUE(plain.logprobs.empty());
  const Logged with = run(s, 3);
  EXPECT_EQ(with.text, plain.text) << "asking for logprobs changed what was drawn";
  ASSERT_EQ(with.reason, FinishReason::Length);
  ASSERT_EQ(with.logprobs.size(), static_cast<size_t>(with.usage.completion_tokens));
  EXPECT_EQ(joined(with.logprobs), with.text);
  for (const auto& t : with.logprobs) {
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_LE(t.sampled.logprob, t.top[0].logprob);
    EXPECT_EQ(t.sampled.piece, m.tok->piece(t.sampled.id));
  }

  // A stop string from the middle of that text: the reply is the text before it, and the token
  // that completed it has no entry (those before it, whose text was held, may).
  const std::string stop = with.text.substr(with.text.size() / 2, 2);
  const size_t at = with.text.find(stop);
  ASSERT_GT(at, 0u);
  const Logged stopped = run(s, 3, {stop});
  ASSERT_EQ(stopped.reason, FinishReason::Stop);
  EXPECT_EQ(stopped.text, with.text.substr(0, at));
  EXPECT_LT(stopped.logprobs.size(), static_cast<size_t>(stopped.usage.completion_tokens));
  EXPECT_EQ(joined(stopped.logprobs).rfind(stopped.text, 0), 0u);
  for (size_t i = 0; i < stopped.logprobs.size(); ++i)
    EXPECT_EQ(stopped.logprobs[i].sampled.id, with.logprobs[i].sampled.id);
}

TEST(SchedulerLogprobs, MoreThanTwentyIsRefusedAtSubmit) {
  GeneratedModel m;
  Engine engine(*m.file, cpu_engine_options(1, 1, 64));
  Scheduler s(engine, *m.tok);
  JobRequest r;
  r.prompt = {1, 2};
  r.top_logprobs = 21;
  EXPECT_ERROR(s.submit(r), "top_logprobs 21 is outside 0..20");
}

}  // namespace
}  // namespace weft::runtime
