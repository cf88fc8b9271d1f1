// Perplexity as llama-perplexity computes it (tools/perplexity/perplexity.cpp, perplexity()): the
// text's tokens (BOS first when the vocabulary adds one) cut into chunks of n_ctx, each evaluated
// from an empty cache with BOS in place of its first token; the log-probability of every token of
// the second half of each chunk, given all before it in the chunk, is summed. Chunks share a
// step in separate KV slots when the engine has them (llama.cpp's n_seq = n_batch / n_ctx).
#pragma once

#include "runtime/engine.h"

#include <functional>
#include <span>
#include <vector>

namespace weft::runtime {

struct PerplexityOptions {
  int32_t n_ctx = 512;    // tokens per chunk (llama.cpp's -c); the engine's context must hold it
  int32_t n_chunks = -1;  // chunks to evaluate; -1: all whole chunks of the text
  Token bos = -1;         // >= 0: replaces each chunk's first token (the vocabulary adds BOS)
};

struct PerplexityResult {
  std::vector<double> running;  // the estimate after each chunk ([1]X,[2]Y ... of llama-perplexity)
  double ppl = 0;               // exp(mean negative log-likelihood)
  double ppl_error = 0;         // llama.cpp's uncertainty: ppl * sqrt(var(nll) / (count - 1)); NaN if undefined
  int64_t count = 0;            // tokens scored
  double nll_sum = 0, nll2_sum = 0;
};

// on_chunk(k, running ppl) after each chunk, in order (k from 1). A weft::Error when the text has
// fewer than 2 * n_ctx tokens (as llama-perplexity) or the engine cannot hold a chunk.
PerplexityResult perplexity(Engine& engine, std::span<const Token> tokens, const PerplexityOptions& o,
                            const std::function<void(int, double)>& on_chunk = {});

}  // namespace weft::runtime
