// weft batched-bench: throughput of several sequences decoded together (continuous batching), in
// llama-batched-bench's table (same flags and columns, so the two compare side by side), plus the
// time to first token of a new prompt while the other sequences keep decoding.
#include "apps/weft/commands.h"
#include "apps/weft/device_report.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "runtime/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

namespace weft::cli {
namespace {

struct BatchedBenchArgs {
  ModelOptions model;
  std::vector<int> npp = {128}, ntg = {32}, npl = {1, 8, 16};
  bool profile = false;
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every sequence's prompt through the engine, packed into steps of at most n_batch tokens.
void prefill(runtime::Engine& e, const std::vector<std::vector<Token>>& prompts, const model::SamplingParams& greedy) {
  std::vector<size_t> fed(prompts.size(), 0);
  for (;;) {
    std::vector<runtime::SeqStep> batch;
    int budget = e.n_batch();
    for (size_t i = 0; i < prompts.size() && budget > 0; ++i) {
      if (fed[i] == prompts[i].size()) continue;
      const size_t n = std::min<size_t>(prompts[i].size() - fed[i], budget);
      runtime::SeqStep s;
      s.seq = static_cast<int32_t>(i);
      s.tokens = std::span<const Token>(prompts[i]).subspan(fed[i], n);
      s.sample = fed[i] + n == prompts[i].size();
      s.sampling = greedy;
      fed[i] += n;
      budget -= static_cast<int>(n);
      batch.push_back(s);
    }
    if (batch.empty()) return;
    e.step_batch(batch);
  }
}

// Steps of one token per sequence in slots [0, n_seq).
void decode_steps(runtime::Engine& e, int n_seq, int steps, const model::SamplingParams& greedy) {
  std::vector<Token> next(n_seq, 1);
  for (int k = 0; k < steps; ++k) {
    std::vector<runtime::SeqStep> batch(n_seq);
    for (int i = 0; i < n_seq; ++i) {
      batch[i].seq = i;
      batch[i].tokens = std::span<const Token>(&next[i], 1);
      batch[i].sample = true;
      batch[i].sampling = greedy;
    }
    const auto out = e.step_batch(batch);
    for (int i = 0; i < n_seq; ++i) next[i] = out[i].token;
  }
}

// Seconds until a prompt in slot `slot` yields its first token while slots [0, others) decode a
// token every step, as a server's scheduler runs it: each step carries their tokens and as much of
// the prompt as the batch has room for.
double time_to_first_token(runtime::Engine& e, int others, int slot, const std::vector<Token>& prompt,
                           const model::SamplingParams& greedy) {
  e.truncate(slot, 0);
  std::vector<Token> next(others, 1);
  const auto t0 = Clock::now();
  for (size_t fed = 0; fed < prompt.size();) {
    std::vector<runtime::SeqStep> batch(others);
    for (int i = 0; i < others; ++i) {
      batch[i].seq = i;
      batch[i].tokens = std::span<const Token>(&next[i], 1);
      batch[i].sample = true;
      batch[i].sampling = greedy;
    }
    const size_t n = std::min<size_t>(prompt.size() - fed, e.n_batch() - others);
    runtime::SeqStep p;
    p.seq = slot;
    p.tokens = std::span<const Token>(prompt).subspan(fed, n);
    p.sample = fed + n == prompt.size();
    p.sampling = greedy;
    fed += n;
    batch.push_back(p);
    const auto out = e.step_batch(batch);
    for (int i = 0; i < others; ++i) next[i] = out[i].token;
  }
  return since(t0);
}

std::vector<int> parse_ints(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  for (const double v : parse_ratios(s)) {
    if (v < 1 || v != static_cast<int>(v)) fail("cli", "{}: '{}' is not a list of positive integers", flag, s);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

int run(const BatchedBenchArgs& a) {
  auto file = gguf::File::open(a.model.model);
  runtime::EngineOptions o = a.model.engine_options();
  const int max_pl = *std::max_element(a.npl.begin(), a.npl.end());
  const int max_pp = *std::max_element(a.npp.begin(), a.npp.end());
  // The decoding sequences go on for at most max_pp more steps while the TTFT probe's prompt goes in.
  const int max_ctx = 2 * max_pp + *std::max_element(a.ntg.begin(), a.ntg.end());
  o.n_seq = max_pl + 1;  // one more slot for the time-to-first-token probe
  if (o.n_ctx <= 0) o.n_ctx = max_ctx;
  if (o.n_ctx < max_ctx) fail("cli", "-c {} per sequence is below 2 npp + ntg = {}", o.n_ctx, max_ctx);
  if (o.n_batch <= max_pl) fail("cli", "-b {} leaves no room for a prompt beside {} sequences", o.n_batch, max_pl);
  runtime::Engine e(*file, o);
  model::SamplingParams greedy;
  greedy.temp = 0;
  std::mt19937_64 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(e.config().dims.n_vocab) - 1);
  auto random_prompt = [&](int n) {
    std::vector<Token> p(n);
    for (auto& t : p) t = pick(rng);
    return p;
  };
  fmt::print("weft batched-bench: {} devices, n_batch = {}, n_ctx per sequence = {}\n\n", e.devices().size(),
             e.n_batch(), e.n_ctx());
  fmt::print("|{:>6} |{:>6} |{:>5} |{:>7} |{:>9} |{:>9} |{:>9} |{:>9} |{:>9} |{:>9} |{:>11} |{:>11} |\n", "PP", "TG",
             "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s", "TTFT ms", "TTFT1 ms");
  fmt::print("|{:-<7}|{:-<7}|{:-<6}|{:-<8}|{:-<10}|{:-<10}|{:-<10}|{:-<10}|{:-<10}|{:-<10}|{:-<12}|{:-<12}|\n", "", "",
             "", "", "", "", "", "", "", "", "", "");
  // Warm-up: first touches of buffers and caches are not the steady state being measured.
  prefill(e, {random_prompt(8)}, greedy);
  e.truncate(0, 0);
  for (int pp : a.npp)
    for (int tg : a.ntg)
      for (int pl : a.npl) {
        std::vector<std::vector<Token>> prompts;
        for (int i = 0; i < pl; ++i) {
          e.truncate(i, 0);
          prompts.push_back(random_prompt(pp));
        }
        auto t0 = Clock::now();
        prefill(e, prompts, greedy);
        const double t_pp = since(t0);
        const auto before_tg = stats_of(e);
        t0 = Clock::now();
        decode_steps(e, pl, tg, greedy);
        const double t_tg = since(t0);
        if (a.profile) {
          fmt::print(stderr, "decode steps of B = {}:\n", pl);
          print_device_report(e, true, before_tg);
        }
        // A new prompt of pp tokens beside the pl - 1 sequences still decoding, and alone.
        const auto probe = random_prompt(pp);
        const double ttft = time_to_first_token(e, pl - 1, max_pl, probe, greedy);
        const double ttft1 = time_to_first_token(e, 0, max_pl, probe, greedy);
        const double n_pp = double(pp) * pl, n_tg = double(tg) * pl;
        fmt::print(
            "|{:>6} |{:>6} |{:>5} |{:>7} |{:>9.3f} |{:>9.2f} |{:>9.3f} |{:>9.2f} |{:>9.3f} |{:>9.2f} |{:>11.1f} "
            "|{:>11.1f} |\n",
            pp, tg, pl, pl * (pp + tg), t_pp, n_pp / t_pp, t_tg, n_tg / t_tg, t_pp + t_tg,
            (n_pp + n_tg) / (t_pp + t_tg), ttft * 1e3, ttft1 * 1e3);
        std::fflush(stdout);
      }
  fmt::print("\nTTFT: a new {}-token prompt's first token while B-1 sequences decode; TTFT1: the same prompt alone\n",
             a.npp.back());
  return 0;
}

}  // namespace

Action add_batched_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("batched-bench", "throughput of sequences decoded together (llama-batched-bench)");
  auto a = std::make_shared<BatchedBenchArgs>();
  auto lists = std::make_shared<std::array<std::string, 3>>();
  a->model.add_to(*cmd);
  cmd->add_option("--npp", (*lists)[0], "prompt tokens of each sequence, comma list (default 128)");
  cmd->add_option("--ntg", (*lists)[1], "generated tokens of each sequence, comma list (default 32)");
  cmd->add_option("--npl", (*lists)[2], "sequences decoded together, comma list (default 1,8,16)");
  cmd->add_flag("--profile", a->profile, "print time per op kind per device of each B's decode steps");
  return [a, lists] {
    if (!(*lists)[0].empty()) a->npp = parse_ints("-npp", (*lists)[0]);
    if (!(*lists)[1].empty()) a->ntg = parse_ints("-ntg", (*lists)[1]);
    if (!(*lists)[2].empty()) a->npl = parse_ints("-npl", (*lists)[2]);
    return run(*a);
  };
}

}  // namespace weft::cli
