// weft bench: prompt processing and generation speed, printed as llama-bench prints it.
#include "apps/weft/commands.h"
#include "apps/weft/device_report.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "runtime/engine.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

namespace weft::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  int n_prompt = 128;
  int n_gen = 32;
  int reps = 5;
  int depth = 0;  // tokens already in the KV cache when each test starts (llama-bench -d)
  std::string output = "md";
  bool profile = false;
};

struct TestResult {
  std::string name;
  int n_tokens = 0;
  std::vector<double> seconds;
  double mean_tps() const {
    double s = 0;
    for (double x : seconds) s += n_tokens / x;
    return s / seconds.size();
  }
  double stddev_tps() const {
    if (seconds.size() < 2) return 0;
    const double m = mean_tps();
    double v = 0;
    for (double x : seconds) v += (n_tokens / x - m) * (n_tokens / x - m);
    return std::sqrt(v / (seconds.size() - 1));
  }
};

std::vector<Token> random_tokens(const runtime::Engine& e, int n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(e.config().dims.n_vocab) - 1);
  std::vector<Token> tokens(n);
  for (auto& t : tokens) t = pick(rng);
  return tokens;
}

// One timed run: a prompt of n tokens in batches, or n single-token steps, after the first `depth`
// positions of the cache (filled once, before the tests).
double time_run(runtime::Engine& e, int depth, int n, bool prompt, std::mt19937_64& rng) {
  e.truncate(depth);
  model::SamplingParams greedy;
  greedy.temp = 0;
  const std::vector<Token> tokens = random_tokens(e, n, rng);
  const auto t0 = std::chrono::steady_clock::now();
  if (prompt) {
    e.eval_and_sample(tokens, greedy, {}, rng);
  } else {
    Token next = tokens[0];
    for (int i = 0; i < n; ++i) next = e.eval_and_sample(std::span(&next, 1), greedy, {}, rng);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int bench(const BenchArgs& a) {
  auto file = gguf::File::open(a.model.model);
  runtime::Engine engine(*file, a.model.engine_options());
  const auto& cfg = engine.config();
  std::mt19937_64 rng(1234);
  std::vector<TestResult> results;
  const std::string at_depth = a.depth > 0 ? fmt::format(" @ d{}", a.depth) : "";
  if (a.n_prompt > 0) results.push_back({fmt::format("pp{}{}", a.n_prompt, at_depth), a.n_prompt, {}});
  if (a.n_gen > 0) results.push_back({fmt::format("tg{}{}", a.n_gen, at_depth), a.n_gen, {}});
  if (a.depth > 0) {  // the context every run starts from; runs only cut the cache back to it
    engine.reset();
    model::SamplingParams greedy;
    greedy.temp = 0;
    engine.eval_and_sample(random_tokens(engine, a.depth, rng), greedy, {}, rng);
  }
  for (auto& r : results) {
    const bool prompt = r.name[0] == 'p';
    time_run(engine, a.depth, prompt ? r.n_tokens : std::min(r.n_tokens, 4), prompt, rng);  // warm-up
    for (int i = 0; i < a.reps; ++i) r.seconds.push_back(time_run(engine, a.depth, r.n_tokens, prompt, rng));
  }

  uint64_t params = 0, bytes = 0;
  for (const auto& t : file->tensors()) {
    params += t.n_elements();
    bytes += t.n_bytes;
  }
  std::string type = "?";
  if (const auto* t = file->find_tensor("blk.0.attn_q.weight")) type = std::string(dtype_name(t->type));
  const std::string model_name = fmt::format("{} {} {}", cfg.arch, fmt::format("{:.0f}M", params / 1e6), type);
  int threads = 0;
  std::string devs;
  for (const auto& d : engine.devices()) {
    threads += d->threads();
    devs += (devs.empty() ? "" : ",") + d->name();
  }
  const std::string sm(parallel::split_mode_name(engine.plan().mode));

  if (a.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : results)
      j.push_back({{"model", model_name},
                   {"size_bytes", bytes},
                   {"params", params},
                   {"devices", devs},
                   {"threads", threads},
                   {"split_mode", sm},
                   {"test", r.name},
                   {"samples_s", r.seconds},
                   {"avg_ts", r.mean_tps()},
                   {"stddev_ts", r.stddev_tps()}});
    std::puts(j.dump(2).c_str());
  } else if (a.output == "csv") {
    std::puts("model,size_bytes,params,devices,threads,split_mode,test,avg_ts,stddev_ts");
    for (const auto& r : results)
      std::printf("\"%s\",%llu,%llu,\"%s\",%d,%s,%s,%.3f,%.3f\n", model_name.c_str(), (unsigned long long)bytes,
                  (unsigned long long)params, devs.c_str(), threads, sm.c_str(), r.name.c_str(), r.mean_tps(),
                  r.stddev_tps());
  } else {
    std::puts("| model | size | params | devices | threads | sm | test | t/s |");
    std::puts("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |");
    for (const auto& r : results)
      std::printf("| %s | %.2f MiB | %.2f M | %s | %d | %s | %s | %.2f ± %.2f |\n", model_name.c_str(),
                  bytes / 1048576.0, params / 1e6, devs.c_str(), threads, sm.c_str(), r.name.c_str(), r.mean_tps(),
                  r.stddev_tps());
  }
  // Collective cost, averaged over every step run (warm-ups included).
  print_device_report(engine, a.profile);
  return 0;
}

}  // namespace

Action add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "measure prompt and generation tokens/s (llama-bench style)");
  a->model.add_to(*cmd);
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens (pp test; 0: skip)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-n,--n-gen", a->n_gen, "generated tokens (tg test; 0: skip)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-r,--repetitions", a->reps, "repetitions of each test")->check(CLI::Range(1, 1000));
  cmd->add_option("-d,--n-depth", a->depth, "tokens already in the KV cache when each test starts")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-o,--output", a->output, "md | csv | json")->check(CLI::IsMember({"md", "csv", "json"}));
  cmd->add_flag("--profile", a->profile, "print time per op kind per device");
  return [a] { return bench(*a); };
}

}  // namespace weft::cli
