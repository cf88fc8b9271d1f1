// weft plan: what a split puts on each device, and what crosses between devices per token.
#include "apps/weft/commands.h"
#include "apps/weft/model_options.h"
#include "core/error.h"
#include "graph/kv_window.h"
#include "model/llama_graph.h"
#include "parallel/cost_model.h"
#include "parallel/memory_fit.h"
#include "parallel/planner.h"
#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace weft::cli {
namespace {

std::string mib(uint64_t b) { return fmt::format("{:.2f} MiB", b / 1048576.0); }

struct PlanArgs {
  ModelOptions model;
  bool calibrate = false;  // --calibrate (or -ts auto): load the devices and measure them
  // The cost model's inputs (print_expected_steps): read speed per device, the link between them.
  std::vector<double> device_gbs;
  double link_latency_us = 30, link_gbit = 10;
};

// The cost model's expected decode step of one sequence for the tensor and the layer split of
// these devices (parallel/cost_model.h says what it counts; batches add compute it does not count).
void print_expected_steps(const PlanArgs& args, const graph::Graph& g, const graph::WeightTable& weights,
                          const std::vector<double>& ratios, const std::vector<double>& speeds,
                          parallel::WireType wire) {
  parallel::LinkCost link;
  link.latency_s = args.link_latency_us * 1e-6;
  link.bytes_per_s = args.link_gbit * 1e9 / 8;
  std::string speed_list;
  for (double s : speeds) speed_list += fmt::format("{}{:.1f}", speed_list.empty() ? "" : ", ", s / 1e9);
  std::printf(
      "\nexpected decode step (cost model: devices read %s GB/s; link %.0f us per message, %.1f Gbit/s; %s wire):\n",
      speed_list.c_str(), args.link_latency_us, args.link_gbit, std::string(parallel::wire_type_name(wire)).c_str());
  std::printf("| split | compute ms | link ms | messages | wire KiB | step ms | tokens/s |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (auto mode : {parallel::SplitMode::Tensor, parallel::SplitMode::Layer}) {
    const auto c = parallel::estimate_decode_step(parallel::make_plan(mode, g, weights, ratios), speeds, link, wire);
    std::printf("| %s | %.3f | %.3f | %d | %.1f | %.3f | %.1f |\n",
                std::string(parallel::split_mode_name(mode)).c_str(), c.compute_s * 1e3, c.link_s * 1e3, c.messages,
                c.wire_bytes / 1024, c.total_s() * 1e3, 1 / c.total_s());
  }
  std::printf("(layer split: the devices run one after another for one sequence; hybrid splits are not planned)\n");
}

// -ts auto's measurements, one row per device, and the ratios chosen from them.
void print_calibration(const runtime::Calibration& c) {
  if (c.steps == 0) {
    std::printf("calibration: no room in the context for a step; ratios kept\n\n");
    return;
  }
  std::printf("calibration: %d decode steps on the starting split\n\n", c.steps);
  std::printf("| device | threads | share | read per token | compute ms/step | link ms/step | speed | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (size_t d = 0; d < c.devices.size(); ++d) {
    const auto& m = c.devices[d];
    std::printf("| #%zu %s | %d | %.3f | %s | %.3f | %.3f | %.2f GB/s | %.3f |\n", d, m.name.c_str(), m.threads,
                m.share, mib(m.decode_bytes).c_str(), m.compute_ms, m.link_ms, m.speed / 1e9,
                d < c.ratios.size() ? c.ratios[d] : 0.0);
  }
  std::printf("\nchosen ratios: -ts %s (%s)\n\n", runtime::ratios_flag(c.ratios).c_str(),
              c.replanned ? "re-planned with them" : "close to the starting split, which is kept");
}

int plan(const PlanArgs& args) {
  const ModelOptions& o = args.model;
  auto file = gguf::File::open(o.model);
  const auto cfg = model::read_config(*file);
  const auto g = model::build_llama_graph(cfg);
  auto eo = o.engine_options();
  parallel::Plan p;
  std::vector<double> speeds = args.device_gbs;  // bytes/s once scaled below
  for (double& s : speeds) s *= 1e9;
  const int64_t n_ctx = eo.n_ctx > 0 ? eo.n_ctx : std::min<int64_t>(cfg.n_ctx_train, 4096);
  runtime::EngineOptions sized = eo;
  sized.n_ctx = static_cast<int32_t>(n_ctx);
  const parallel::KvSizing kv = device::kv_sizing(runtime::load_options(sized, g.dims.recurrent()));
  std::vector<device::DeviceMemory> memory;  // per device of the plan
  if (args.calibrate || eo.auto_ratios) {
    eo.auto_ratios = true;
    const runtime::Engine engine(*file, eo);
    print_calibration(engine.calibration());
    p = engine.plan();
    for (const auto& d : engine.devices()) memory.push_back(d->memory());  // a worker's as it said
    if (speeds.empty())
      for (const auto& m : engine.calibration().devices) speeds.push_back(m.speed);
  } else {
    // A split -ts wrote is planned as written; one weft chooses fits the devices' hard memory
    // limits, as the engine plans it (parallel/memory_fit.h).
    const bool written = !eo.ratios.empty() && eo.mode != parallel::SplitMode::None;
    if (eo.ratios.empty() || eo.mode == parallel::SplitMode::None) {
      if (eo.mode == parallel::SplitMode::None) eo.devices.resize(1);
      eo.ratios = device::default_ratios(eo.devices);
    }
    if (eo.ratios.size() != eo.devices.size())
      fail("cli", "--tensor-split has {} values for {} devices", eo.ratios.size(), eo.devices.size());
    std::vector<std::optional<uint64_t>> limits;
    for (const auto& spec : eo.devices) {
      memory.push_back(device::spec_memory(spec));
      const device::DeviceMemory& m = memory.back();
      limits.push_back(m.known() && m.hard_limit && !written ? std::optional<uint64_t>(m.free_bytes) : std::nullopt);
    }
    p = parallel::plan_within_memory(eo.mode, g, model::weight_table(*file), eo.ratios, eo.moe_split, limits, kv);
  }

  std::printf("model: %s (%s), %lld layers, %lld heads / %lld kv heads, ffn %lld, vocab %lld\n", o.model.c_str(),
              cfg.arch.c_str(), (long long)cfg.dims.n_layer, (long long)cfg.dims.n_head, (long long)cfg.dims.n_head_kv,
              (long long)cfg.dims.n_ff, (long long)cfg.dims.n_vocab);
  if (cfg.dims.mla())  // DeepSeek: the cache holds latents, not heads
    std::printf(
        "latent attention: heads %lld wide (%lld rotated), values %lld; each device caches the %lld-value latent and "
        "%lld-value RoPE key of every token (kv heads: none)\n",
        (long long)cfg.dims.head_dim, (long long)cfg.dims.rope.n_rot, (long long)cfg.dims.v_head_dim,
        (long long)cfg.dims.kv_lora_rank, (long long)cfg.dims.rope.n_rot);
  if (cfg.dims.n_layer_dense_lead > 0)
    std::printf("dense layers: the first %lld (ffn %lld), experts after\n", (long long)cfg.dims.n_layer_dense_lead,
                (long long)cfg.dims.n_ff);
  if (!cfg.dims.layer_heads.empty()) {  // Gemma 4: each shape of heads and how many layers have it
    std::map<std::pair<int64_t, int64_t>, int> shapes;
    for (const auto& h : cfg.dims.layer_heads) ++shapes[{h.head_dim, h.n_head_kv}];
    std::string text;
    for (const auto& [shape, n] : shapes)
      text += fmt::format("{}{} layers of heads {} wide over {} kv heads", text.empty() ? "" : ", ", n, shape.first,
                          shape.second);
    std::printf("heads per layer: %s\n", text.c_str());
  }
  if (!cfg.dims.layer_ff.empty()) {  // Gemma 4 E2B: each FFN width and how many layers have it
    std::map<int64_t, int> widths;
    for (int64_t w : cfg.dims.layer_ff) ++widths[w];
    std::string text;
    for (const auto& [w, n] : widths) text += fmt::format("{}{} layers {} wide", text.empty() ? "" : ", ", n, w);
    std::printf("ffn per layer: %s, each cut by the shares (the table: layer 0's)\n", text.c_str());
  }
  if (!cfg.dims.kv_source.empty()) {  // Gemma 4 E2B/E4B
    std::map<int, std::vector<int>> readers;
    for (int l = 0; l < cfg.dims.n_layer; ++l)
      if (!cfg.dims.owns_kv(l)) readers[cfg.dims.kv_layer_of(l)].push_back(l);
    std::string text;
    for (const auto& [src, ls] : readers)
      text += fmt::format("{}layers {} over layer {}'s", text.empty() ? "" : "; ", fmt::join(ls, ","), src);
    std::printf("shared KV caches: %s (no cache of their own)\n", text.c_str());
  }
  if (cfg.dims.n_embd_per_layer > 0)
    std::printf("per-layer inputs: %lld values a layer, computed whole on every device (no collective)\n",
                (long long)cfg.dims.n_embd_per_layer);
  std::printf("split mode: %s over %zu devices\n", std::string(parallel::split_mode_name(p.mode)).c_str(),
              p.devices.size());
  const bool moe = cfg.dims.n_expert > 0;
  if (moe)
    std::printf("experts: %lld per layer, %lld per token, %lld wide%s; moe split: %s (%s)\n",
                (long long)cfg.dims.n_expert, (long long)cfg.dims.n_expert_used, (long long)cfg.dims.n_ff_exp,
                cfg.dims.n_ff_shexp ? fmt::format(", shared expert {} wide", cfg.dims.n_ff_shexp).c_str() : "",
                std::string(parallel::moe_split_name(p.moe_split)).c_str(), p.moe_reason.c_str());
  if (cfg.dims.n_swa > 0) {
    const auto n_local = std::count(cfg.dims.swa_layers.begin(), cfg.dims.swa_layers.end(), 1);
    std::printf(
        "sliding window: %lld positions in %lld of %lld layers, whose KV cache keeps %lld of the %lld per slot\n",
        (long long)cfg.dims.n_swa, (long long)n_local, (long long)cfg.dims.n_layer,
        (long long)graph::kv_window_rows(n_ctx, cfg.dims.n_swa, eo.n_batch), (long long)n_ctx);
  }
  if (cfg.dims.recurrent()) {  // Gated DeltaNet: each device's key heads, their state in the KV column
    std::printf(
        "\nlinear attention: %lld of %lld layers, %lld key heads and %lld value heads of %lld; key heads a device:",
        (long long)(cfg.dims.n_layer - cfg.dims.n_layer / cfg.dims.full_attention_interval),
        (long long)cfg.dims.n_layer, (long long)cfg.dims.linear_k_heads, (long long)cfg.dims.linear_v_heads,
        (long long)cfg.dims.linear_head_dim);
    const auto* part = p.partition(graph::Axis::LinearKHeads);
    for (size_t d = 0; d < p.devices.size(); ++d) {
      const auto r = part ? part->ranges[d] : parallel::Range{0, cfg.dims.linear_k_heads * cfg.dims.linear_head_dim};
      const int64_t hd = cfg.dims.linear_head_dim;
      std::printf(" #%zu %s", d, r.empty() ? "-" : fmt::format("{}..{}", r.begin / hd, r.end / hd - 1).c_str());
    }
    std::printf("; the KV cache column includes their recurrent state (f32, per slot)\n");
  }
  std::printf(
      "\n| device | share | weights (embedding replicated) | read per token | KV cache (%lld ctx) | q heads | kv heads "
      "| "
      "ffn | experts | vocab | layers |\n",
      (long long)n_ctx);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const auto& dg = p.devices[d];
    auto range = [&](graph::Axis a, int64_t div) {
      const auto* part = p.partition(a);
      if (!part || p.devices.size() == 1 || p.mode != parallel::SplitMode::Tensor) return std::string("all");
      const auto& r = part->ranges[d];
      return r.empty() ? std::string("-") : fmt::format("{}..{}", r.begin / div, r.end / div - 1);
    };
    // Experts: which ones (expert split), else the rows of every expert (tensor split).
    std::string experts = "-";
    if (moe && p.moe_split == parallel::MoeSplit::Expert && !p.experts.empty()) {
      const auto& r = p.experts[d];
      experts = r.empty() ? "none" : fmt::format("{}..{}", r.begin, r.end - 1);
    } else if (moe) {
      experts = "all, features " + range(graph::Axis::ExpertFfn, 1);
    }
    std::string layers = "all";
    if (p.mode == parallel::SplitMode::Layer)
      layers = p.layers[d].empty() ? "-" : fmt::format("{}..{}", p.layers[d].begin, p.layers[d].end - 1);
    std::printf(
        "| #%zu %s | %.3f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", d, device::describe(eo.devices[d]).c_str(),
        p.ratios[d], mib(dg.weight_bytes).c_str(), mib(dg.decode_bytes).c_str(),
        mib(parallel::kv_cache_bytes(dg, {n_ctx, eo.k_type, eo.v_type, 1, eo.n_batch})).c_str(),
        range(graph::Axis::QHeads, cfg.dims.head_dim).c_str(), range(graph::Axis::KvHeads, cfg.dims.head_dim).c_str(),
        (moe && cfg.dims.n_ff_shexp  ? range(graph::Axis::SharedFfn, 1)  // qwen2moe's shared expert
         : !moe || cfg.traits.gemma4 ? range(graph::Axis::Ffn, 1)        // Gemma 4: its dense FFN beside the experts
                                     : std::string("-"))                 // experts only
            .c_str(),
        experts.c_str(), range(graph::Axis::Vocab, 1).c_str(), layers.c_str());
  }
  std::printf(
      "\ndevice memory (free of total; what the plan puts there: weights and KV cache of -c x -np positions; a CPU "
      "device reads weights past its free memory from the file mapping):\n");
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const device::DeviceMemory m = d < memory.size() ? memory[d] : device::DeviceMemory{};
    const uint64_t need = parallel::device_bytes(p.devices[d], kv);
    std::string line = "unknown";
    if (m.known()) line = mib(m.free_bytes) + " of " + mib(m.total_bytes) + (m.hard_limit ? " (a hard limit)" : "");
    if (!m.known() && eo.devices[d].kind == device::DeviceSpec::Kind::Remote)
      line += " until a run connects (a worker says it then)";
    line += "; the plan puts " + mib(need) + " there";
    if (p.memory_capped(d))
      line += fmt::format(": share capped by memory at {:.3f} (asked {:.3f})", p.ratios[d], p.asked_ratios[d]);
    else if (m.known() && m.hard_limit && need > m.free_bytes)
      line += ": too little, a load refuses";
    std::printf("  #%zu %s: %s\n", d, device::describe(eo.devices[d]).c_str(), line.c_str());
  }
  std::printf("\ncollectives per token:\n");
  std::map<int, std::vector<const parallel::CollectiveInfo*>> by_layer;
  uint64_t total = 0;
  for (const auto& c : p.collectives) {
    by_layer[c.layer].push_back(&c);
    total += c.bytes_per_token(eo.wire);
  }
  if (by_layer.empty()) std::printf("  none\n");
  for (const auto& [layer, cs] : by_layer) {
    std::string line;
    for (const auto* c : cs)
      line += fmt::format("{}{} after {} ({} B)", line.empty() ? "" : ", ", parallel::local_op_name(c->op), c->after,
                          c->bytes_per_token(eo.wire));
    std::printf("  layer %d: %zu: %s\n", layer, cs.size(), line.c_str());
  }
  std::printf("  total: %zu collectives, %llu bytes per rank per token (%s)\n", p.collectives.size(),
              (unsigned long long)total, std::string(parallel::wire_type_name(eo.wire)).c_str());
  if (p.mode == parallel::SplitMode::Tensor)
    std::printf("  sampling: each device returns its top candidates from its vocabulary slice (no logits gather)\n");
  if (p.mode == parallel::SplitMode::Layer)
    std::printf("  layer split: the residual stream (%lld B per token) is handed from each device to the next\n",
                (long long)cfg.dims.n_embd * 4);
  std::printf("\nfallbacks (ops without a split rule, gathered and replicated): %s\n",
              p.fallbacks.empty() ? "none" : "");
  for (const auto& f : p.fallbacks) std::printf("  %s\n", f.c_str());
  if (p.devices.size() > 1) {
    std::set<int64_t> granules;
    for (const auto& ln : p.devices[0].nodes)
      if (ln.granule > 0) granules.insert(ln.granule);
    const std::string sizes = fmt::format("{}", fmt::join(granules, " and "));
    if (eo.exact)
      std::printf(
          "\nresults: one device's, bit for bit (--exact: the split sums added in fixed point, granules of %s "
          "features)\n",
          sizes.c_str());
    else
      std::printf(
          "\nresults: within rounding of one device's (the split sums add in another order); --exact makes "
          "them the same bits (CPU devices, one kernel level)\n");
  }
  if (speeds.size() == 1 && p.devices.size() > 1) speeds.resize(p.devices.size(), speeds[0]);
  if (p.devices.size() > 1 && !speeds.empty()) {
    if (speeds.size() != p.devices.size())
      fail("cli", "--device-gbs has {} values for {} devices", speeds.size(), p.devices.size());
    print_expected_steps(args, g, model::weight_table(*file), p.ratios, speeds, eo.wire);
  } else if (p.devices.size() > 1) {
    std::printf("\nexpected step times: give --device-gbs (each device's read speed) or --calibrate\n");
  }
  return 0;
}

}  // namespace

Action add_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "show how a model is split across devices");
  a->model.add_to(*cmd);
  cmd->add_flag("--calibrate", a->calibrate,
                "load the devices, time a few decode steps on each and print the measurements and the ratios "
                "-ts auto chooses (the plan shown is theirs)");
  cmd->add_option("--device-gbs", a->device_gbs,
                  "read speed of each device in GB/s (one value: all), for the expected step times; "
                  "--calibrate measures it")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--link-latency-us", a->link_latency_us, "cost model: one message between devices, in us")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--link-gbit", a->link_gbit, "cost model: link bandwidth per direction, in Gbit/s")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [a] { return plan(*a); };
}

}  // namespace weft::cli
