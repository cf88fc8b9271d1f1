#include "runtime/engine.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/device_group.h"
#include "model/llama_graph.h"
#include "parallel/planner.h"

#include <algorithm>

namespace weft::runtime {

using parallel::SplitMode;

Engine::Engine(const gguf::File& file, EngineOptions opt) : file_(file), opt_(std::move(opt)) {
  config_ = model::read_config(file_);
  graph_ = model::build_llama_graph(config_);
  if (opt_.devices.empty()) opt_.devices.push_back({device::DeviceSpec::Kind::Cpu, hardware_cores(), -1, ""});
  const size_t n = opt_.devices.size();
  if (opt_.mode == SplitMode::None && n > 1) opt_.devices.resize(1);
  if (opt_.ratios.empty() || opt_.mode == SplitMode::None) {
    opt_.ratios.clear();
    for (size_t i = 0; i < opt_.devices.size(); ++i) opt_.ratios.push_back(opt_.devices[i].threads);
  }
  if (opt_.ratios.size() != opt_.devices.size())
    fail("cli", "--tensor-split has {} values for {} devices", opt_.ratios.size(), opt_.devices.size());
  if (opt_.n_ctx <= 0) opt_.n_ctx = static_cast<int32_t>(std::min<int64_t>(config_.n_ctx_train, 4096));
  if (opt_.n_batch <= 0) fail("cli", "--batch-size must be positive");

  plan_ = parallel::make_plan(opt_.mode, graph_, model::weight_table(file_), opt_.ratios);
  devices_ = device::create_devices(opt_.devices, opt_.map_weights);
  for (const auto& dg : plan_.devices)
    for (const auto& ln : dg.nodes) {
      const DType t =
          ln.weight.kind != parallel::WeightSlice::Kind::None ? file_.tensor(ln.weight.tensor).type : DType::F32;
      if (!devices_[dg.device]->supports(ln.op, t))
        fail("engine", "{} cannot run {} on {} weights ({})", devices_[dg.device]->name(),
             parallel::local_op_name(ln.op), dtype_name(t), ln.weight.tensor);
    }
  if (plan_.mode == SplitMode::Tensor) device::connect_group(devices_, opt_.wire);
  const device::LoadOptions lo{opt_.n_ctx, opt_.n_batch, opt_.k_type, opt_.v_type};
  device::load_devices(devices_, plan_.devices, file_, lo);
}

Engine::~Engine() = default;

void Engine::truncate(int32_t n_keep) {
  if (n_keep < 0 || n_keep > n_past_) fail("engine", "truncate to {} positions, {} held", n_keep, n_past_);
  for (auto& d : devices_) d->truncate_cache(n_keep);
  n_past_ = n_keep;
}

std::vector<device::StepResult> Engine::step(std::span<const model::Token> tokens, bool last_chunk,
                                             const model::SamplingParams& p, std::span<const model::Token> recent,
                                             bool logits) {
  device::Step s;
  s.tokens.assign(tokens.begin(), tokens.end());
  s.pos0 = n_past_;
  s.want_candidates = last_chunk && !logits;
  s.want_logits = last_chunk && logits;
  s.sampling = p;
  s.recent.assign(recent.begin(), recent.end());
  std::vector<device::StepResult> results(devices_.size());
  if (plan_.mode == SplitMode::Layer) {
    // Pipeline: each device runs its layers in turn and hands the residual stream on.
    for (size_t i = 0; i < devices_.size(); ++i) {
      devices_[i]->submit(s);
      results[i] = devices_[i]->wait();
      s.input = std::move(results[i].output);
    }
  } else {
    for (auto& d : devices_) d->submit(s);
    wait_all(results);
  }
  n_past_ += static_cast<int32_t>(tokens.size());
  return results;
}

namespace {
// How long a wait dwells on one device before looking at the others (a step that finishes returns
// at once; this only bounds how late a silent worker elsewhere is noticed).
constexpr int kPollMs = 50;
// A collective that failed is usually the echo of a peer that died (see weft::Blame).
bool is_echo(const Error& e) { return e.blame() == Blame::Peer; }
}  // namespace

// Waits for every device's step, watching all of them: one that fails (or is found silent) aborts
// the others' steps, so none sits in a collective with it until a timeout, whatever the mix of
// local and remote devices. The failed device's own error is reported, not the echoes it caused.
void Engine::wait_all(std::vector<device::StepResult>& results) {
  const size_t n = devices_.size();
  std::vector<bool> done(n, false), aborted(n, false);
  std::exception_ptr cause, echo;
  auto fail_device = [&](size_t i, const std::exception_ptr& e, bool echo_kind) {
    if (echo_kind || aborted[i]) {  // the dead peer itself is still to be heard from
      if (!echo) echo = e;
      return;
    }
    if (!cause) cause = e;
    for (size_t k = 0; k < n; ++k)
      if (!done[k] && !aborted[k] && k != i) {
        aborted[k] = true;
        devices_[k]->abort();
      }
  };
  for (size_t left = n; left > 0;) {
    bool first = true;  // dwell on the first unfinished device, glance at the rest
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      try {
        if (!devices_[i]->poll(first ? kPollMs : 0)) {
          first = false;
          continue;
        }
        results[i] = devices_[i]->wait();
      } catch (const Error& e) {
        fail_device(i, std::current_exception(), is_echo(e));
      } catch (...) {
        fail_device(i, std::current_exception(), false);
      }
      done[i] = true;
      --left;
    }
  }
  if (cause) std::rethrow_exception(cause);
  if (echo) std::rethrow_exception(echo);
}

std::vector<device::StepResult> Engine::eval(std::span<const model::Token> tokens, const model::SamplingParams& p,
                                             std::span<const model::Token> recent, bool logits) {
  if (tokens.empty()) fail("engine", "nothing to evaluate");
  if (n_past_ + static_cast<int64_t>(tokens.size()) > opt_.n_ctx)
    fail("engine", "context is full: {} + {} tokens exceed -c {}", n_past_, tokens.size(), opt_.n_ctx);
  std::vector<device::StepResult> r;
  for (size_t i = 0; i < tokens.size(); i += opt_.n_batch) {
    const size_t n = std::min<size_t>(opt_.n_batch, tokens.size() - i);
    r = step(tokens.subspan(i, n), i + n == tokens.size(), p, recent, logits);
  }
  return r;
}

model::Token Engine::eval_and_sample(std::span<const model::Token> tokens, const model::SamplingParams& p,
                                     std::span<const model::Token> recent, std::mt19937_64& rng) {
  auto results = eval(tokens, p, recent, false);
  std::vector<model::LocalCandidates> parts;
  for (size_t i = 0; i < results.size(); ++i)
    if (plan_.devices[i].has_logits) parts.push_back(std::move(results[i].candidates));
  return model::sample(std::move(parts), p, rng);
}

std::vector<float> Engine::eval_logits(std::span<const model::Token> tokens) {
  auto results = eval(tokens, {}, {}, true);
  std::vector<float> logits(config_.dims.n_vocab);
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& dg = plan_.devices[i];
    if (!dg.has_logits) continue;
    WEFT_ASSERT(static_cast<int64_t>(results[i].logits.size()) == dg.vocab.size());
    std::copy(results[i].logits.begin(), results[i].logits.end(), logits.begin() + dg.vocab.begin);
  }
  return logits;
}

}  // namespace weft::runtime
