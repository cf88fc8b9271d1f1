// A conversation on the engine, as `weft chat` runs it: each turn keeps the cache and feeds only
// what differs. The reply to the second message must be the one a fresh engine gives when fed
// the whole conversation at once, on one device and split across two.
#include "chat/chat_model.h"
#include "chat/chat_session.h"
#include "device/device_spec.h"
#include "runtime/turn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

namespace weft::chat {
namespace {

// The chat model, with engines on the devices asked for.
struct Model : test_support::ChatModel {
  explicit Model(const Template& t) : ChatModel(*t.family()) {}
  std::unique_ptr<runtime::Engine> engine(const std::string& devices) const {
    runtime::EngineOptions o;
    o.devices = device::parse_devices(devices);
    if (o.devices.size() > 1) o.mode = parallel::SplitMode::Tensor;
    o.n_ctx = 256;
    return std::make_unique<runtime::Engine>(*file, o);
  }
};

model::SamplingParams greedy() {
  model::SamplingParams p;
  p.temp = 0;
  return p;
}

// Draws up to n tokens after `seq`'s first `keep` cached ones; returns them.
std::vector<Token> turn(runtime::Engine& e, const tokenizer::Tokenizer& tok, const std::vector<Token>& seq,
                        int32_t keep, int n, const std::function<void(Token)>& accept, size_t* fed = nullptr) {
  std::mt19937_64 rng(1);
  std::vector<Token> drawn;
  const runtime::TurnResult r = runtime::run_turn(e, tok, seq, keep, n, greedy(), rng, {[&](Token t) {
                                                    drawn.push_back(t);
                                                    accept(t);
                                                  }});
  if (fed) *fed = r.n_fed;
  return drawn;
}

// Two turns through the session (the first reply cut at `first_reply` tokens, so without its
// end-of-turn token), then the second reply again from a fresh engine given everything at once.
void expect_second_reply_as_from_scratch(Family family, const std::string& devices, int first_reply) {
  const Template tmpl(family);
  const Model m(tmpl);
  auto engine = m.engine(devices);
  Session s(tmpl, *m.tok);
  s.add({"system", "be brief"}, false);
  int32_t keep = s.add({"user", "once upon a time"});
  turn(*engine, *m.tok, s.tokens(), keep, first_reply, [&](Token t) { s.add_generated(t); });
  s.end_reply();
  keep = s.add({"user", "then what"});
  const std::vector<Token> conversation = s.tokens();
  const int32_t cached_before = engine->n_past();
  size_t fed = 0;
  const std::vector<Token> cached = turn(
      *engine, *m.tok, s.tokens(), keep, 12, [&](Token t) { s.add_generated(t); }, &fed);
  // Only what the cache does not share is fed: the system prompt and the first message stay.
  EXPECT_GT(keep, 0);
  EXPECT_EQ(fed, conversation.size() - std::min(cached_before, keep));

  auto fresh = m.engine("cpu:1");
  std::vector<Token> seq = conversation;
  const std::vector<Token> scratch = turn(*fresh, *m.tok, seq, 0, 12, [&](Token t) { seq.push_back(t); });
  ASSERT_FALSE(scratch.empty());
  EXPECT_EQ(cached, scratch) << family_name(family) << " on " << devices;
}

// /regen and /clear take the cache back: what follows must not see what was taken back.
TEST(ChatEngine, RegenerateAndClearCutTheCacheBack) {
  const Template tmpl(Family::ChatML);
  const Model m(tmpl);
  auto engine = m.engine("cpu:1,cpu:1");
  Session s(tmpl, *m.tok);
  s.add({"system", "be brief"}, false);
  const int32_t keep = s.add({"user", "once upon a time"});
  const std::vector<Token> first = turn(*engine, *m.tok, s.tokens(), keep, 8, [&](Token t) { s.add_generated(t); });
  s.end_reply();
  // Greedy: the same reply again, drawn after the prompt, not after the first reply.
  const std::optional<int32_t> again = s.regenerate();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(turn(*engine, *m.tok, s.tokens(), *again, 8, [&](Token t) { s.add_generated(t); }), first);
  s.end_reply();

  s.clear();
  const int32_t kept = s.add({"user", "a new story"});
  const std::vector<Token> conversation = s.tokens();
  const std::vector<Token> after_clear =
      turn(*engine, *m.tok, s.tokens(), kept, 8, [&](Token t) { s.add_generated(t); });
  auto fresh = m.engine("cpu:1");
  std::vector<Token> seq = conversation;
  EXPECT_EQ(after_clear, turn(*fresh, *m.tok, seq, 0, 8, [&](Token t) { seq.push_back(t); }));
}

TEST(ChatEngine, TheSecondReplyFromTheCacheIsTheReplyFromScratch) {
  for (const char* devices : {"cpu:1", "cpu:1,cpu:1"}) {
    expect_second_reply_as_from_scratch(Family::ChatML, devices, 6);
    // llama3 trims the reply when rendering it again: the cache is rolled back into the reply.
    expect_second_reply_as_from_scratch(Family::Llama3, devices, 6);
  }
}

}  // namespace
}  // namespace weft::chat
