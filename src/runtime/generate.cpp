#include "runtime/generate.h"

#include "core/error.h"
#include "core/progress.h"
#include "runtime/token_texts.h"

#include <chrono>
#include <optional>

namespace weft::runtime {

using Clock = std::chrono::steady_clock;

uint64_t resolve_seed(uint64_t seed) {
  if (seed != 0xFFFFFFFFull) return seed;
  return std::random_device{}();
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Limit: return "limit";
    case StopReason::EndOfGeneration: return "eog";
    case StopReason::ContextFull: return "context_full";
  }
  return "?";
}

namespace {

// A prompt longer than a batch: every piece but the last is fed here, with progress on a terminal;
// returns the last piece (sampled after it). The pieces are those Engine::eval_and_sample cuts.
std::span<const Token> prefill(Engine& engine, std::span<const Token> prompt) {
  const size_t b = static_cast<size_t>(engine.n_batch());
  if (prompt.size() <= b) return prompt;
  const size_t last = (prompt.size() - 1) / b * b;
  Progress progress("prompt", last, "tokens");
  for (size_t at = 0; at < last; at += b) {
    SeqStep q;
    q.tokens = prompt.subspan(at, b);
    engine.step_batch({&q, 1});
    progress.add(b);
  }
  return prompt.subspan(last);
}

}  // namespace

GenerateResult generate(Engine& engine, const tokenizer::Tokenizer* tok, const std::vector<Token>& prompt,
                        int n_predict, const model::SamplingParams& p,
                        const std::function<void(const std::string&)>& on_text,
                        std::shared_ptr<const model::Grammar> grammar) {
  if (prompt.empty()) fail("run", "the prompt is empty (no tokens to start from)");
  if (engine.n_past() + static_cast<int64_t>(prompt.size()) > engine.n_ctx())
    fail("run", "the prompt ({} tokens) does not fit the context (-c {})", prompt.size(), engine.n_ctx());
  GenerateResult r;
  r.prompt = prompt;
  std::mt19937_64 rng(resolve_seed(p.seed));
  std::vector<Token> history = prompt;
  auto recent = [&] {
    const size_t n = std::min<size_t>(history.size(), p.repeat_last_n > 0 ? p.repeat_last_n : 0);
    return std::span<const Token>(history.data() + history.size() - n, n);
  };
  auto t0 = Clock::now();
  std::optional<model::GrammarConstraint> constraint;
  if (grammar) {
    if (!tok) fail("run", "a grammar needs the model's tokenizer");
    constraint.emplace(std::move(grammar), token_texts(*tok));
  }
  std::span<const Token> feed = prefill(engine, prompt);
  Token next = -1;
  for (int i = 0; i < n_predict; ++i) {
    if (engine.n_past() + static_cast<int64_t>(feed.size()) > engine.n_ctx()) {
      r.stop = StopReason::ContextFull;
      break;
    }
    if (constraint) {
      SeqStep last;  // prefill left at most one batch to feed
      last.tokens = feed;
      last.sample = true;
      last.sampling = p;
      last.recent = recent();
      last.rng = &rng;
      last.constraint = &*constraint;
      SeqOutput o = std::move(engine.step_batch({&last, 1})[0]);
      if (!o.error.empty()) fail("run", "{}", o.error);
      next = o.token;
      constraint->accept(next);
    } else {
      next = engine.eval_and_sample(feed, p, recent(), rng);
    }
    if (i == 0) {
      r.prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      t0 = Clock::now();
    }
    if (tok && tok->is_eog(next)) {
      r.stop = StopReason::EndOfGeneration;
      break;
    }
    r.generated.push_back(next);
    history.push_back(next);
    if (tok) {
      std::string piece = tok->piece(next);
      r.text += piece;
      if (on_text) on_text(piece);
    }
    feed = std::span<const Token>(&r.generated.back(), 1);
    if (constraint && constraint->finished()) {  // nothing but the end can follow
      r.stop = StopReason::EndOfGeneration;
      break;
    }
  }
  if (!r.generated.empty()) r.gen_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace weft::runtime
