// weft bench: llama-bench's flags (comma lists, every combination a test), timing and output
// (bench_output.h), over weft's devices. Tests that share a model configuration share one engine.
#include "apps/weft/bench_output.h"
#include "apps/weft/commands.h"
#include "apps/weft/device_report.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "core/stream_read.h"
#include "device/vulkan/vk_memory_read.h"
#include "kernels/cpu_features.h"
#include "runtime/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

namespace weft::cli {
namespace {

struct BenchArgs {
  ModelOptions base;  // devices, rpc, wire, keys: one value for every test
  std::string models, threads, batch = "512", type_k = "f16", type_v = "f16", split_mode = "", tensor_split = "",
                               mmap = "0";
  std::string n_prompt = "512", n_gen = "128", n_depth = "0";
  std::vector<std::string> pg;  // "pp,tg" per -pg
  int reps = 5;
  std::string output = "md";
  bool profile = false;
  bool roofline = false;
};

std::vector<std::string> split_list(const std::string& s, const char* flag) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= s.size();) {
    const size_t comma = std::min(s.find(',', start), s.size());
    out.push_back(s.substr(start, comma - start));
    if (out.back().empty()) fail("cli", "{}: empty item in '{}'", flag, s);
    start = comma + 1;
  }
  return out;
}

std::vector<int> int_list(const std::string& s, const char* flag, int min, int max) {
  std::vector<int> out;
  for (const std::string& item : split_list(s, flag)) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < min || v > max)
      fail("cli", "{}: '{}' is not a whole number in {}..{}", flag, item, min, max);
    out.push_back(v);
  }
  return out;
}

// One model configuration (an engine) and the tests run on it.
struct Test {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
};
struct Config {
  ModelOptions model;
  std::vector<Test> tests;
};

// llama-bench's nesting: model parameters outermost, then depth, then pp / tg / pg tests.
std::vector<Config> expand(const BenchArgs& a) {
  const auto prompts = int_list(a.n_prompt, "-p", 0, 1 << 16), gens = int_list(a.n_gen, "-n", 0, 1 << 16);
  const auto depths = int_list(a.n_depth, "-d", 0, 1 << 20);
  std::vector<std::pair<int, int>> pgs;
  for (const std::string& s : a.pg) {
    const auto v = int_list(s, "-pg", 0, 1 << 16);
    if (v.size() != 2) fail("cli", "-pg: '{}' is not pp,tg", s);
    pgs.emplace_back(v[0], v[1]);
  }
  for (const std::string& t : split_list(a.type_k + "," + a.type_v, "-ctk/-ctv"))
    if (t != "f16" && t != "f32") fail("cli", "-ctk/-ctv: '{}' is not a KV cache type (f16, f32)", t);
  if (!a.split_mode.empty())
    for (const std::string& sm : split_list(a.split_mode, "-sm"))
      if (sm != "none" && sm != "layer" && sm != "tensor") fail("cli", "-sm: '{}' is not none, layer or tensor", sm);
  if (!a.base.devices.empty() && !a.threads.empty())
    fail("cli", "-t sets the threads of the one default device; with --devices each device names its own");
  std::vector<Config> out;
  for (const std::string& m : split_list(a.models, "-m"))
    for (const std::string& sm : a.split_mode.empty() ? std::vector<std::string>{""} : split_list(a.split_mode, "-sm"))
      for (const std::string& ts :
           a.tensor_split.empty() ? std::vector<std::string>{""} : split_list(a.tensor_split, "-ts"))
        for (int b : int_list(a.batch, "-b", 1, 8192))
          for (const std::string& tk : split_list(a.type_k, "-ctk"))
            for (const std::string& tv : split_list(a.type_v, "-ctv"))
              for (int t : a.threads.empty() ? std::vector<int>{0} : int_list(a.threads, "-t", 1, 4096))
                for (int mm : int_list(a.mmap, "-mmp", 0, 1)) {
                  Config c{a.base, {}};
                  c.model.model = m;
                  c.model.split_mode = sm;
                  c.model.tensor_split = ts;
                  std::replace(c.model.tensor_split.begin(), c.model.tensor_split.end(), '/', ',');  // 3/1
                  c.model.batch = b;
                  c.model.cache_type_k = tk;
                  c.model.cache_type_v = tv;
                  c.model.threads = t;
                  c.model.mmap = c.model.mmap || mm;
                  for (int d : depths) {
                    for (int p : prompts)
                      if (p > 0) c.tests.push_back({p, 0, d});
                    for (int g : gens)
                      if (g > 0) c.tests.push_back({0, g, d});
                    for (const auto& [p, g] : pgs)
                      if (p > 0 || g > 0) c.tests.push_back({p, g, d});
                  }
                  if (!c.tests.empty()) out.push_back(std::move(c));
                }
  if (out.empty()) fail("cli", "no test to run (every -p, -n and -pg is 0)");
  return out;
}

std::vector<Token> random_tokens(const runtime::Engine& e, int n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(e.config().dims.n_vocab) - 1);
  std::vector<Token> tokens(n);
  for (auto& t : tokens) t = pick(rng);
  return tokens;
}

uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

// --roofline: the generated tokens of a tg test are timed in runs of kTokensPerRead, and between
// two runs the streaming read runs at the test's thread count. A run's weight bytes per second
// then stand beside the mean of the reads just before and after it, a tenth of a second apart:
// this VM's DRAM bandwidth drifts by up to 2x within minutes, which a read taken as a separate
// run does not see. Not a read after every token: the token after a read ran 4% slower (500m
// q4_0, 2 threads: 126 t/s against 131 with the same pauses and no read; the read takes the
// caches and the TLB's huge-page entries the next token's weights had).
// On Vulkan devices the read is the GPU's (device::vk::VkMemoryRead): its device memory, read by a
// shader and timed by the GPU, between the same runs of tokens.
struct Roofline {
  static constexpr int kTokensPerRead = 8;
  std::unique_ptr<StreamRead> host;               // CPU devices: this host's DRAM
  std::unique_ptr<device::vk::VkMemoryRead> gpu;  // vk:N devices: that GPU's memory
  // Weights one decoded token reads, every device together (the plan's).
  uint64_t decode_bytes = 0;
  double read() {
    // The devices' pools spin about a millisecond after their last op before they sleep; a read
    // started at once would share the cores with them (a software Vulkan device's too).
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return gpu ? gpu->read() : host->read();
  }
};

// One timed run from `depth` cached positions: the prompt in batches, then n_gen single steps.
// With a roofline, the time of the steps only (the reads between them are not counted).
uint64_t time_run(runtime::Engine& e, const Test& t, std::mt19937_64& rng, Roofline* roof = nullptr,
                  BenchRecord* r = nullptr) {
  e.truncate(t.n_depth);
  model::SamplingParams greedy;
  greedy.temp = 0;
  const std::vector<Token> prompt = random_tokens(e, t.n_prompt, rng);
  Token next = random_tokens(e, 1, rng)[0];
  if (roof) {
    uint64_t total = 0;
    double before = roof->read();
    for (int i = 0; i < t.n_gen; i += Roofline::kTokensPerRead) {
      const int n = std::min(Roofline::kTokensPerRead, t.n_gen - i);
      const auto t0 = std::chrono::steady_clock::now();
      for (int j = 0; j < n; ++j) next = e.eval_and_sample(std::span(&next, 1), greedy, {}, rng);
      const uint64_t ns = ns_since(t0);
      const double after = roof->read();
      total += ns;
      r->decode_bps.push_back(1e9 * static_cast<double>(roof->decode_bytes * n) / static_cast<double>(ns));
      r->read_bps.push_back((before + after) / 2);
      before = after;
    }
    return total;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (t.n_prompt > 0) next = e.eval_and_sample(prompt, greedy, {}, rng);
  for (int i = 0; i < t.n_gen; ++i) next = e.eval_and_sample(std::span(&next, 1), greedy, {}, rng);
  return ns_since(t0);
}

std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%FT%TZ", &tm);
  return buf;
}

// The GPU index of a "vk:N" device name, or -1.
int vk_index(const std::string& name) {
  if (name.rfind("vk:", 0) != 0) return -1;
  try {
    return std::stoi(name.substr(3));
  } catch (const std::exception&) {
    return -1;
  }
}

// What the record says of the model and the engine.
BenchRecord describe(const Config& c, const gguf::File& f, const runtime::Engine& e) {
  BenchRecord r;
  r.model_filename = c.model.model;
  for (const auto& t : f.tensors()) {
    r.model_n_params += static_cast<uint64_t>(t.n_elements());
    r.model_size += t.n_bytes;
  }
  std::string type = "?";
  if (const auto* t = f.find_tensor("blk.0.attn_q.weight")) type = std::string(dtype_name(t->type));
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return std::toupper(ch); });
  const double p = static_cast<double>(r.model_n_params);
  r.model_type = fmt::format("{} {} {}", e.config().arch,
                             p >= 1e9 ? fmt::format("{:.0f}B", p / 1e9) : fmt::format("{:.0f}M", p / 1e6), type);
  r.n_batch = c.model.batch;
  r.type_k = c.model.cache_type_k;
  r.type_v = c.model.cache_type_v;
  r.split_mode = std::string(parallel::split_mode_name(e.plan().mode));
  r.use_mmap = c.model.mmap;
  r.wire = c.model.wire;
  const std::vector<double>& shares = e.plan().ratios;  // normalised
  for (size_t i = 0; i < e.devices().size(); ++i) {
    const auto& d = e.devices()[i];
    r.n_threads += d->threads();
    r.devices += (r.devices.empty() ? "" : ",") + d->name();
    r.tensor_split += fmt::format("{}{:.2f}", i ? "/" : "", i < shares.size() ? shares[i] : 0.0);
    if (d->name().rfind("tcp://", 0) == 0) r.backends = "RPC";
    if (vk_index(d->name()) >= 0 && r.backends == "CPU") r.backends = "Vulkan";  // llama-bench's name
  }
  return r;
}

// CPU devices: the read runs on this host at the threads of every device together, the roofline
// of local devices only. Vulkan devices: every one on the same GPU (vk:0 or vk:0,vk:0), whose
// memory all of them read their weights from; 1 GiB, far past any GPU's L2.
std::unique_ptr<Roofline> make_roofline(const runtime::Engine& e) {
  auto roof = std::make_unique<Roofline>();
  int threads = 0, n_vk = 0, gpu = -1;
  for (size_t d = 0; d < e.devices().size(); ++d) {
    const std::string name = e.devices()[d]->name();
    if (!e.devices()[d]->reach().in_process)
      fail("cli", "--roofline reads this host's memory; device {} is not in this process", name);
    const int index = vk_index(name);
    if (index >= 0 && gpu >= 0 && index != gpu)
      fail("cli", "--roofline reads one GPU's memory; vk:{} and vk:{} are two GPUs", gpu, index);
    if (index >= 0) gpu = index, ++n_vk;
    threads += e.devices()[d]->threads();
    roof->decode_bytes += e.plan().devices[d].decode_bytes;
  }
  if (n_vk > 0 && n_vk != static_cast<int>(e.devices().size()))
    fail("cli", "--roofline reads either this host's memory or a GPU's; these devices mix them");
  if (n_vk > 0) {
    roof->gpu = std::make_unique<device::vk::VkMemoryRead>(gpu, uint64_t{1} << 30);
    std::fprintf(stderr, "roofline: vk:%d (%s) reads %.0f MiB per read, %s\n", gpu, roof->gpu->device_name().c_str(),
                 roof->gpu->bytes() / 1048576.0, roof->gpu->gpu_timed() ? "timed by the GPU" : "timed on the host");
    return roof;
  }
  // Twice the L3 (at least 256 MiB) in four windows: a window comes back after three others and
  // the tokens between them, from DRAM, and one read takes about as long as a token.
  roof->host = std::make_unique<StreamRead>(threads, std::max(size_t{256} << 20, 2 * last_level_cache_bytes()),
                                            /*windows=*/4);
  return roof;
}

int bench(const BenchArgs& a) {
  if (a.output != "md") std::fputs(bench_header(a.output).c_str(), stdout);
  std::vector<BenchRecord> all;
  std::mt19937_64 rng(1234);
  for (const Config& c : expand(a)) {
    auto file = gguf::File::open(c.model.model);
    runtime::EngineOptions eo = c.model.engine_options();
    eo.ctx_checkpoints = 0;  // prompts as llama-bench times them: in whole steps, no state kept
    eo.n_ctx = 0;
    for (const Test& t : c.tests) eo.n_ctx = std::max(eo.n_ctx, t.n_prompt + t.n_gen + t.n_depth);
    runtime::Engine engine(*file, eo);
    const bool has_tg = std::any_of(c.tests.begin(), c.tests.end(), [](const Test& t) { return t.n_prompt == 0; });
    const std::unique_ptr<Roofline> roof = a.roofline && has_tg ? make_roofline(engine) : nullptr;
    std::vector<device::DeviceStats> since;
    for (const Test& t : c.tests) {
      BenchRecord r = describe(c, *file, engine);
      r.n_prompt = t.n_prompt, r.n_gen = t.n_gen, r.n_depth = t.n_depth;
      r.test_time = utc_now();
      engine.reset();
      if (t.n_depth > 0) {  // the context every run starts from; runs only cut the cache back to it
        model::SamplingParams greedy;
        greedy.temp = 0;
        engine.eval_and_sample(random_tokens(engine, t.n_depth, rng), greedy, {}, rng);
      }
      time_run(engine, {std::min(t.n_prompt, 32), std::min(t.n_gen, 1), t.n_depth}, rng);  // warm-up
      if (since.empty()) since = stats_of(engine);
      Roofline* tg_roof = t.n_prompt == 0 ? roof.get() : nullptr;
      if (tg_roof) r.decode_bytes = tg_roof->decode_bytes;
      for (int i = 0; i < a.reps; ++i) r.samples_ns.push_back(time_run(engine, t, rng, tg_roof, &r));
      if (a.output != "md") {
        std::fputs(bench_row(a.output, r, all.empty()).c_str(), stdout);
        std::fflush(stdout);
      }
      all.push_back(std::move(r));
    }
    // Collective cost and per-op times, averaged over the steps after the first test's warm-up (a
    // GPU makes its pipelines in the warm-up).
    print_device_report(engine, a.profile, since);
  }
  std::fputs(a.output == "md" ? bench_markdown(all).c_str() : bench_footer(a.output).c_str(), stdout);
  // Under the table, as llama-bench's build line: which kernels made these numbers.
  if (a.output == "md") std::printf("\nkernels: %s\n", kernels::kernel_summary().c_str());
  return 0;
}

}  // namespace

Action add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "measure prompt and generation tokens/s (llama-bench's flags and output)");
  cmd->add_option("-m,--model", a->models, "GGUF model(s), comma separated")->required();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens of the pp tests, e.g. 64,512 (0: none)");
  cmd->add_option("-n,--n-gen", a->n_gen, "generated tokens of the tg tests, e.g. 16,128 (0: none)");
  cmd->add_option("--pg", a->pg, "(-pg) pp,tg: a prompt then generation, timed together; repeatable");
  cmd->add_option("-d,--n-depth", a->n_depth, "tokens already in the KV cache when each test starts, e.g. 0,4096");
  cmd->add_option("-b,--batch-size", a->batch, "prompt tokens per step, e.g. 256,512");
  cmd->add_option("-t,--threads", a->threads, "threads of the one default device, e.g. 1,2,4 (default: all cores)");
  cmd->add_option("--cache-type-k", a->type_k, "(-ctk) f16 | f32, comma separated");
  cmd->add_option("--cache-type-v", a->type_v, "(-ctv) f16 | f32, comma separated");
  cmd->add_option("--split-mode", a->split_mode, "(-sm) none | layer | tensor, comma separated");
  cmd->add_option("--tensor-split", a->tensor_split, "(-ts) shares as 3/1, comma separated sets");
  cmd->add_option("--mmp", a->mmap, "(-mmp) 0 | 1: weights read from the file mapping, comma separated");
  cmd->add_option("--moe-split", a->base.moe_split, "mixtures of experts: auto | tensor | expert")
      ->check(CLI::IsMember({"auto", "tensor", "expert"}));
  cmd->add_option("-r,--repetitions", a->reps, "repetitions of each test")->check(CLI::Range(1, 1000));
  cmd->add_option("-o,--output", a->output, "md | csv | json | jsonl")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}));
  cmd->add_option("--devices", a->base.devices, "devices of every test, e.g. cpu:1,cpu:1 (weft's own)");
  cmd->add_option("--rpc", a->base.rpc, "workers HOST:PORT,... appended after --devices");
  cmd->add_option("--auth-key-file", a->base.auth_key_file, "key shared with the workers");
  cmd->add_option("--wire", a->base.wire, "element type of collectives: f32 | bf16 | f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_flag("--exact", a->base.exact, "fixed-point sums over split axes (one device's bits at any split)");
  cmd->add_option("--net-poll", a->base.net_poll, "auto | busy | block");
  cmd->add_option("--net-shm", a->base.net_shm, "on | off: same-host groups all-reduce through shared memory")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--mmap", a->base.mmap, "as -mmp 1");
  cmd->add_flag("--profile", a->profile, "print time per op kind per device");
  cmd->add_flag("--roofline", a->roofline,
                "tg tests: between tokens, a streaming read of this host's memory at the same threads; "
                "reports the decode's weight bytes/s against it");
  return [a] { return bench(*a); };
}

}  // namespace weft::cli
