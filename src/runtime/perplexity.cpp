#include "runtime/perplexity.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft::runtime {

PerplexityResult perplexity(Engine& engine, std::span<const Token> tokens, const PerplexityOptions& o,
                            const std::function<void(int, double)>& on_chunk) {
  const int64_t n_ctx = o.n_ctx;
  if (n_ctx < 4) fail("perplexity", "a context of {} tokens is too small to score (need 4 or more)", n_ctx);
  if (n_ctx > engine.n_ctx())
    fail("perplexity", "chunks of {} tokens exceed the engine's context {}", n_ctx, engine.n_ctx());
  if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
    fail("perplexity", "you need at least {} tokens to evaluate perplexity with a context of {}; the text has {}",
         2 * n_ctx, n_ctx, tokens.size());
  int64_t n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (o.n_chunks >= 0) n_chunk = std::min<int64_t>(n_chunk, o.n_chunks);
  // Several chunks per step, one per KV slot, when a step holds them; else one chunk in pieces.
  const int64_t n_batch = engine.n_batch();
  const int64_t per_step = std::clamp<int64_t>(n_batch / n_ctx, 1, engine.n_seq());
  const int64_t first = n_ctx / 2;  // the first half of a chunk is context only

  PerplexityResult r;
  std::vector<std::vector<Token>> inputs(per_step), targets(per_step);
  for (int64_t i = 0; i < n_chunk; i += per_step) {
    const int64_t n_here = std::min(per_step, n_chunk - i);
    for (int64_t s = 0; s < n_here; ++s) {
      const auto chunk = tokens.subspan((i + s) * n_ctx, n_ctx);
      inputs[s].assign(chunk.begin(), chunk.end());
      if (o.bos >= 0) inputs[s][0] = o.bos;
      engine.truncate(static_cast<int32_t>(s), 0);
    }
    std::vector<std::vector<double>> log_probs(n_here);
    const int64_t piece = std::min(n_ctx, n_batch);
    for (int64_t b = 0; b < n_ctx; b += piece) {
      const int64_t e = std::min(n_ctx, b + piece);
      // Rows [lo, hi) of this piece predict the chunk's next tokens (the original ones).
      const int64_t lo = std::max(b, first), hi = std::min(e, n_ctx - 1);
      std::vector<SeqStep> batch(n_here);
      for (int64_t s = 0; s < n_here; ++s) {
        const auto chunk = tokens.subspan((i + s) * n_ctx, n_ctx);
        SeqStep& q = batch[s];
        q.seq = static_cast<int32_t>(s);
        q.tokens = std::span<const Token>(inputs[s]).subspan(b, e - b);
        if (lo < hi) {
          q.score_from = static_cast<int32_t>(lo - b);
          q.score_next = chunk.subspan(lo + 1, hi - lo);
        }
      }
      std::vector<SeqOutput> out = engine.step_batch(batch);
      for (int64_t s = 0; s < n_here; ++s)
        log_probs[s].insert(log_probs[s].end(), out[s].log_probs.begin(), out[s].log_probs.end());
    }
    for (int64_t s = 0; s < n_here; ++s) {
      for (double lp : log_probs[s]) {
        r.nll_sum -= lp;
        r.nll2_sum += lp * lp;
      }
      r.count += static_cast<int64_t>(log_probs[s].size());
      r.running.push_back(std::exp(r.nll_sum / static_cast<double>(r.count)));
      if (on_chunk) on_chunk(static_cast<int>(i + s + 1), r.running.back());
    }
  }
  // llama-perplexity's final estimate and its uncertainty (the standard error of the mean nll,
  // carried through exp).
  const double mean = r.nll_sum / static_cast<double>(r.count);
  const double var = r.nll2_sum / static_cast<double>(r.count) - mean * mean;
  r.ppl = std::exp(mean);
  r.ppl_error = var > 0 && r.count > 1 ? std::sqrt(var / static_cast<double>(r.count - 1)) * r.ppl
                                       : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace weft::runtime
