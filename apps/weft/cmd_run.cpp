// weft run: generate text, streamed to stdout (prompt + generation); timings to stderr.
#include "apps/weft/commands.h"
#include "apps/weft/device_report.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "runtime/generate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace weft::cli {
namespace {

struct RunArgs {
  ModelOptions model;
  std::string prompt;
  int n_predict = 128;
  model::SamplingParams sampling;
  bool json = false;
  bool profile = false;
};

int run(const RunArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto file = gguf::File::open(a.model.model);
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  runtime::Engine engine(*file, a.model.engine_options());
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();

  const auto prompt = tok->encode(a.prompt, /*add_special=*/true, /*parse_special=*/true);
  if (!a.json) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  auto r = runtime::generate(engine, tok.get(), prompt, a.n_predict, a.sampling, [&](const std::string& piece) {
    if (a.json) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const double pp = r.prompt_seconds > 0 ? prompt.size() / r.prompt_seconds : 0;
  const size_t n_decode = r.generated.size() > 1 ? r.generated.size() - 1 : 0;
  const double tg = r.gen_seconds > 0 ? n_decode / r.gen_seconds : 0;
  if (a.json) {
    nlohmann::json j;
    j["prompt"] = a.prompt;
    j["prompt_ids"] = r.prompt;
    j["generated_ids"] = r.generated;
    j["text"] = r.text;
    j["timings"] = {{"load_s", load_s},
                    {"prompt_s", r.prompt_seconds},
                    {"prompt_tokens_per_s", pp},
                    {"gen_s", r.gen_seconds},
                    {"gen_tokens_per_s", tg}};
    j["stop"] = runtime::stop_reason_name(r.stop);
    j["split_mode"] = parallel::split_mode_name(engine.plan().mode);
    j["devices"] = static_cast<int>(engine.devices().size());
    // A piece may end mid UTF-8 sequence (byte tokens): replace invalid bytes rather than fail.
    std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);
  if (!a.json) std::fputc('\n', stderr);  // stdout holds exactly prompt + generation; end the line on the terminal
  std::fprintf(stderr, "load: %.3f s | %d devices, split %s\n", load_s, static_cast<int>(engine.devices().size()),
               std::string(parallel::split_mode_name(engine.plan().mode)).c_str());
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f t/s)\n", prompt.size(), r.prompt_seconds, pp);
  std::fprintf(stderr, "generation: %zu tokens, %zu decode steps in %.3f s (%.2f t/s)\n", r.generated.size(), n_decode,
               r.gen_seconds, tg);
  if (r.stop == runtime::StopReason::ContextFull)  // as llama.cpp does: never stop short silently
    std::fprintf(stderr, "weft: context full (-c %d): stopped after %zu of the %d tokens asked for (-n)\n",
                 engine.n_ctx(), r.generated.size(), a.n_predict);
  if (a.profile) print_device_report(engine, true);
  return 0;
}

}  // namespace

Action add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  a->model.add_to(*cmd);
  cmd->add_option("-p,--prompt", a->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", a->n_predict, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  auto& s = a->sampling;
  cmd->add_option("--temp", s.temp, "temperature (0: greedy)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--seed,-s", s.seed, "RNG seed (default: random)");
  cmd->add_option("--top-k", s.top_k, "top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", s.top_p, "top-p (1: off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", s.min_p, "min-p (0: off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back")->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", a->json, "print one JSON object (ids, text, timings) instead of the text");
  cmd->add_flag("--profile", a->profile, "print time per op kind and collective wait per device");
  return [a] { return run(*a); };
}

}  // namespace weft::cli
