#include "apps/weft/model_options.h"

#include "apps/weft/llama_args.h"

#include "core/error.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "device/remote/remote_device.h"
#include "device/remote/worker_discovery.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace weft::cli {

void ModelOptions::add_to(CLI::App& cmd, bool with_ctx) {
  cmd.add_option("-m,--model", model, "GGUF model file")->required();
  cmd.add_option("-t,--threads", threads, "threads of the single CPU device (default: all cores)")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--devices", devices, "devices to split across, e.g. cpu:1,cpu:1 or cpu:2@0,cpu:2@1");
  cmd.add_option("--split-mode", split_mode, "(-sm) none | layer | tensor (default: tensor with several devices)")
      ->check(CLI::IsMember({"none", "layer", "tensor"}));
  cmd.add_option("--tensor-split", tensor_split,
                 "(-ts) share of each device, e.g. 3,1 (default: by threads), or auto: measured at load");
  cmd.add_flag("--rebalance", rebalance,
               "re-plan while running when one device stays the slowest by 15% over 64 steps (ratios from the "
               "devices' measured speeds)");
  // Tests force a re-plan with these (lag 0, min change 0: every window); hidden from --help.
  cmd.add_option("--rebalance-window", rebalance_policy.window, "steps judged together")
      ->check(CLI::Range(1, 1 << 20))
      ->group("");
  cmd.add_option("--rebalance-lag", rebalance_policy.lag, "least lag of the slowest device")
      ->check(number_range(0.0, 1e6))
      ->group("");
  cmd.add_option("--rebalance-min-change", rebalance_policy.min_change, "least change of a share to re-plan")
      ->check(number_range(0.0, 1.0))
      ->group("");
  cmd.add_option("--moe-split", moe_split,
                 "how a tensor split cuts a mixture of experts: auto | tensor (rows of every expert) | expert (whole "
                 "experts per device)")
      ->check(CLI::IsMember({"auto", "tensor", "expert"}));
  if (with_ctx)
    cmd.add_option("-c,--ctx-size", ctx, "context size (default: min(training context, 4096))")
        ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("-b,--batch-size", batch, "prompt tokens per step")->check(CLI::Range(1, 8192));
  cmd.add_option("--wire", wire, "element type of collectives: f32 | bf16 | f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd.add_option("--ctx-checkpoints", ctx_checkpoints,
                 "(-ctxcp) recurrent models (Qwen 3.5, Qwen3-Next): states kept per slot a few tokens before "
                 "each prompt's end, so that a conversation's next turn continues from there when the chat "
                 "template renders the last reply again differently (0..64, on each device; default 4)")
      ->check(CLI::Range(0, 64));
  cmd.add_flag("--exact", exact,
               "the same logits, bit for bit, whatever the split, ratios or re-plans: the sums a split cuts "
               "are added in fixed point (CPU devices)");
  cmd.add_option("--rpc", rpc,
                 "workers (weft worker) HOST:PORT,... appended after --devices (or after the default CPU device)");
  cmd.add_option("--discover-timeout", discover_timeout_ms,
                 "--devices auto / --rpc auto: how long to collect the workers that answer (ms)")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  cmd.add_option("--discover-addr", discover_addr,
                 fmt::format("--devices auto: where to ask, a multicast group or broadcast address with the port "
                             "(default {}, as weft worker --announce)",
                             net::kDefaultDiscoveryAddress));
  cmd.add_option("--discover-iface", discover_iface,
                 "--devices auto: IPv4 address of the one interface to ask on (default: every interface that is up)");
  cmd.add_flag("--rejoin", rejoin,
               "at each re-plan after a device loss, also retry the workers lost before: those that answer a "
               "handshake again rejoin (weft serve retries them between requests)");
  cmd.add_option("--auth-key-file", auth_key_file,
                 "shared key the workers require, a file only its owner can read (default: $WEFT_AUTH_KEY_FILE)");
  cmd.add_option("--net-poll", net_poll,
                 "how this process's ranks wait in all-reduces: auto | busy (poll 50 us, then sleep) | block")
      ->check(CLI::IsMember({"auto", "busy", "block"}));
  cmd.add_option("--net-shm", net_shm,
                 "on: a group whose ranks (workers, this process) all share one host all-reduces through shared "
                 "memory instead of loopback TCP | off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option("--cache-type-k", cache_type_k, "(-ctk) KV cache type of K: f16 | f32")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd.add_option("--cache-type-v", cache_type_v, "(-ctv) KV cache type of V: f16 | f32")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd.add_option("--on-device-loss", on_device_loss,
                 "when a device fails mid-run: replan (drop it, re-plan over the others, replay the KV cache and go "
                 "on while one is left) | fail (end with its error)")
      ->check(CLI::IsMember({"replan", "fail"}));
  cmd.add_flag("--mmap,!--no-mmap", mmap,
               "CPU devices read weights from the file mapping (zero copy) instead of a copy on huge pages "
               "(--no-mmap: the copy, the default)");
  cmd.add_option("--n-gpu-layers,--gpu-layers", n_gpu_layers,
                 "(-ngl) llama.cpp's GPU offload; weft has no GPU devices, every layer runs on --devices");
  cmd.add_option("--main-gpu", main_gpu, "(-mg) llama.cpp's main GPU; no GPU devices in weft");
  cmd.add_option("--flash-attn", flash_attn,
                 "(-fa) [on|off|auto]: weft's attention is always fused (tiled, online softmax)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"", "on", "off", "auto", "1", "0"}));
  cmd.add_flag("--mlock", mlock, "keep this process's memory (the CPU devices' weights) in RAM");
}

std::vector<std::string> ModelOptions::notes() const {
  std::vector<std::string> out;
  if (!n_gpu_layers.empty())
    out.push_back(
        fmt::format("-ngl {}: weft has no GPU devices; every layer runs on the devices of --devices", n_gpu_layers));
  if (!main_gpu.empty()) out.push_back(fmt::format("-mg {}: weft has no GPU devices; ignored", main_gpu));
  if (flash_attn != "absent")
    out.push_back(
        "-fa: weft's attention is always fused (tiled, online softmax, as flash attention does); "
        "the flag changes nothing");
  if (mlock && (!rpc.empty() || devices.find("tcp://") != std::string::npos))
    out.push_back("--mlock locks this process's memory only, not the workers'");
  return out;
}

void ModelOptions::lock_memory() const {
  if (!mlock) return;
  // MCL_CURRENT only: locking future allocations too would make them fail once the limit is hit.
  if (mlockall(MCL_CURRENT) != 0)
    std::fprintf(stderr, "weft: warning: --mlock: mlockall failed (%s); raise RLIMIT_MEMLOCK (ulimit -l)\n",
                 std::strerror(errno));
}

std::vector<double> parse_ratios(const std::string& s) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(start, comma - start);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !std::isfinite(v) || v < 0)
      fail("cli", "--tensor-split: '{}' is not a number >= 0 (in '{}')", item, s);
    out.push_back(v);
    start = comma + 1;
    if (comma == s.size()) break;
  }
  return out;
}

// --devices auto / --rpc auto: the workers that answer within the timeout and pass the handshake.
// Those left out (another protocol major, a refused key) are named on stderr, never joined.
std::vector<device::DeviceSpec> ModelOptions::discovered_workers() const {
  net::DiscoveryOptions d;
  d.address = net::parse_host_port(discover_addr.empty() ? net::kDefaultDiscoveryAddress : discover_addr);
  d.interface = discover_iface;
  const auto found = device::remote::discover_workers(d, discover_timeout_ms, device::remote::coordinator_key());
  for (const std::string& f : found.found)
    if (!quiet && !log_disabled()) std::fprintf(stderr, "weft: discovered worker %s\n", f.c_str());
  for (const std::string& f : found.left_out) std::fprintf(stderr, "weft: left out worker %s\n", f.c_str());
  if (found.workers.empty())
    fail("cli", "--devices auto: no usable worker answered on {} within {} ms{}", d.address.str(), discover_timeout_ms,
         found.left_out.empty() ? "" : " (see the ones left out above)");
  return found.workers;
}

runtime::EngineOptions ModelOptions::engine_options() const {
  if (!quiet)
    for (const std::string& n : notes()) std::fprintf(stderr, "weft: note: %s\n", n.c_str());
  // The workers' key first: discovery authenticates the workers it finds.
  device::remote::CoordinatorConfig net;
  net.key_file = auth_key_file;
  net.progress = !log_disabled();
  net.net_poll = parallel::parse_net_poll(net_poll);
  net.host_shm = net_shm == "on";
  device::remote::set_coordinator_config(net);
  runtime::EngineOptions o;
  const bool discover = devices == "auto" || rpc == "auto";
  if (!devices.empty() && devices != "auto") {
    o.devices = device::parse_devices(devices);
  } else {
    o.devices.push_back({device::DeviceSpec::Kind::Cpu, threads > 0 ? threads : hardware_cores(), -1, ""});
  }
  if (discover)
    for (auto& s : discovered_workers()) o.devices.push_back(std::move(s));
  if (!rpc.empty() && rpc != "auto") {
    std::string list;  // HOST:PORT,HOST:PORT -> tcp://HOST:PORT,...; parse_devices validates each
    for (size_t start = 0; start <= rpc.size();) {
      const size_t comma = std::min(rpc.find(',', start), rpc.size());
      list += (list.empty() ? "tcp://" : ",tcp://") + rpc.substr(start, comma - start);
      start = comma + 1;
    }
    for (auto& s : device::parse_devices(list)) o.devices.push_back(std::move(s));
  }
  if (o.devices.size() > 16) fail("cli", "--devices and --rpc: {} devices, at most 16", o.devices.size());
  if (split_mode == "none")
    o.mode = parallel::SplitMode::None;
  else if (split_mode == "layer")
    o.mode = parallel::SplitMode::Layer;
  else
    o.mode = o.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  if (tensor_split == "auto")
    o.auto_ratios = true;
  else if (!tensor_split.empty())
    o.ratios = parse_ratios(tensor_split);
  o.rebalance = rebalance_policy;
  o.rebalance.enabled = rebalance;
  o.moe_split = moe_split == "tensor"   ? parallel::MoeSplit::Tensor
                : moe_split == "expert" ? parallel::MoeSplit::Expert
                                        : parallel::MoeSplit::Auto;
  o.n_ctx = ctx;
  o.n_batch = batch;
  o.map_weights = mmap;
  o.rejoin = rejoin;
  o.on_device_loss = on_device_loss == "fail" ? runtime::OnDeviceLoss::Fail : runtime::OnDeviceLoss::Replan;
  o.k_type = cache_type_k == "f32" ? DType::F32 : DType::F16;
  o.v_type = cache_type_v == "f32" ? DType::F32 : DType::F16;
  o.exact = exact;
  o.ctx_checkpoints = ctx_checkpoints;
  o.wire = wire == "bf16"  ? parallel::WireType::BF16
           : wire == "f16" ? parallel::WireType::F16
                           : parallel::WireType::F32;
  return o;
}

}  // namespace weft::cli
