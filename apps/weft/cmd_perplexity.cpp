// weft perplexity: llama-perplexity's numbers (chunks of -c tokens, the second half of each scored)
// over any device mix; the log-probabilities are reduced on the devices, no logits gathered.
#include "apps/weft/commands.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "core/text_file.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

#include <chrono>
#include <cstdio>
#include <memory>

namespace weft::cli {

Action add_perplexity(CLI::App& app) {
  struct Args {
    ModelOptions m;
    std::string file;
    int chunks = -1;
  };
  auto a = std::make_shared<Args>();
  a->m.ctx = 512;  // llama-perplexity's defaults
  a->m.batch = 2048;
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file, computed as llama-perplexity does");
  a->m.add_to(*cmd);
  cmd->add_option("-f,--file", a->file, "text file")->required();
  cmd->add_option("--chunks", a->chunks, "evaluate at most this many chunks (default: all)");
  return [a] {
    const std::string text = weft::read_text_file(a->file, "-f");  // as is: no newline stripped
    auto f = gguf::File::open(a->m.model);
    auto tok = tokenizer::Tokenizer::from_gguf(*f);
    const std::vector<Token> tokens = tok->encode(text, /*add_special=*/true);
    if (a->m.ctx <= 0) fail("cli", "perplexity needs a context size (-c > 0)");

    runtime::EngineOptions eo = a->m.engine_options();
    // As llama-perplexity: a batch of several contexts evaluates that many chunks at once, each in
    // its own KV slot.
    eo.n_ctx = a->m.ctx;
    eo.n_seq = std::max(1, a->m.batch / a->m.ctx);
    eo.n_batch = std::min(a->m.batch, a->m.ctx * eo.n_seq);
    const auto t0 = std::chrono::steady_clock::now();
    runtime::Engine engine(*f, eo);
    std::fprintf(stderr, "perplexity: %zu tokens; chunks of n_ctx=%d, batch_size=%d, n_seq=%d\n", tokens.size(),
                 eo.n_ctx, eo.n_batch, eo.n_seq);
    runtime::PerplexityOptions po;
    po.n_ctx = a->m.ctx;
    po.n_chunks = a->chunks;
    po.bos = tok->adds_bos() ? tok->bos() : -1;
    const runtime::PerplexityResult r = runtime::perplexity(engine, tokens, po, [](int k, double ppl) {
      std::printf("[%d]%.4f,", k, ppl);
      std::fflush(stdout);
    });
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
    std::fprintf(stderr, "perplexity: %lld tokens scored in %.2f s\n", static_cast<long long>(r.count),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  };
}

}  // namespace weft::cli
