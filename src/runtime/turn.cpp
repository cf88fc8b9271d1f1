#include "runtime/turn.h"

#include <algorithm>
#include <chrono>
#include <climits>

namespace weft::runtime {

TurnResult run_turn(Engine& engine, const tokenizer::Tokenizer& tok, const std::vector<Token>& seq, int32_t keep,
                    int n_predict, const model::SamplingParams& p, std::mt19937_64& rng, const TurnHooks& hooks) {
  int32_t n = std::min(engine.n_past(), keep);
  // Drawing needs the logits of the last token: when the cache holds all of seq (a reply
  // regenerated), its last token is fed again.
  if (!seq.empty() && n >= static_cast<int32_t>(seq.size())) n = static_cast<int32_t>(seq.size()) - 1;
  n = engine.resumable(0, n);  // a sliding window that has moved past n: the whole sequence again
  engine.truncate(n);
  std::vector<Token> feed(seq.begin() + n, seq.end());
  TurnResult r;
  r.n_fed = feed.size();
  const auto t0 = std::chrono::steady_clock::now();
  const int limit = n_predict < 0 ? INT_MAX : n_predict;
  for (int i = 0; i < limit && !feed.empty(); ++i) {
    if (engine.n_past() + static_cast<int64_t>(feed.size()) > engine.n_ctx()) {
      r.stop = StopReason::ContextFull;
      break;
    }
    // The penalties look back over the whole sequence, the earlier turns included (llama.cpp's
    // sampler has accepted every token of the session).
    const size_t window = std::min<size_t>(seq.size(), std::max(p.repeat_last_n, 0));
    const Token next =
        engine.eval_and_sample(feed, p, std::span<const Token>(seq.data() + seq.size() - window, window), rng);
    hooks.accept(next);
    ++r.n_drawn;
    if (tok.is_eog(next)) {
      r.stop = StopReason::EndOfGeneration;
      break;
    }
    if (hooks.text) hooks.text(tok.piece(next));
    if (hooks.should_stop && hooks.should_stop()) {
      r.interrupted = true;
      break;
    }
    feed.assign(1, next);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace weft::runtime
