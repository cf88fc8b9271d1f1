#include "runtime/device_loss.h"

#include "core/progress.h"
#include "device/remote/remote_device.h"
#include "device/remote/worker_discovery.h"
#include "model/model_config.h"
#include "parallel/memory_fit.h"
#include "parallel/planner.h"
#include "runtime/engine.h"
#include "runtime/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

namespace weft::runtime {

using Clock = std::chrono::steady_clock;

namespace {
// A worker ends an aborted session within a few of its 20 ms watch periods; a sanitizer build, or
// a worker finishing a cache write, takes longer. Past this a busy worker counts as lost.
constexpr auto kBusyWait = std::chrono::seconds(10);
constexpr auto kBusyRetry = std::chrono::milliseconds(100);
}  // namespace

std::optional<size_t> lost_device(const Error& e, std::span<const std::string> names) {
  if (e.blame() == Blame::Peer) return std::nullopt;
  const auto it = std::find(names.begin(), names.end(), e.device());
  if (e.device().empty() || it == names.end()) return std::nullopt;
  return static_cast<size_t>(it - names.begin());
}

bool is_worker_busy(const Error& e) {
  // The worker's refusal (WorkerServer::admit), relayed by the handshake.
  return e.message().find("worker busy") != std::string::npos;
}

std::string describe_split(std::span<const std::string> names, std::span<const double> ratios) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{} (ratio {})", i ? ", " : "", names[i], i < ratios.size() ? ratios[i] : 0.0);
  return out;
}

std::vector<device::StepResult> Engine::run_step_surviving(const device::Step& s) {
  // Each recovery drops a device, so this ends: in a result, or in the error of the last one.
  // After one, the step runs without its state copies: the replay rebuilt the states, and the new
  // devices hold no checkpoints.
  device::Step without;
  const device::Step* step = &s;
  for (;;) {
    try {
      return run_step(*step);
    } catch (const Error& e) {
      recover(e);
    }
    if (step == &s && !s.state_copies.empty()) {
      without = s;
      without.state_copies.clear();
      step = &without;
    }
  }
}

void Engine::recover(const Error& cause) {
  const auto t0 = Clock::now();
  std::optional<Error> failure = cause;
  for (;;) {
    if (!is_worker_busy(*failure) || Clock::now() - t0 > kBusyWait) {
      std::vector<std::string> names;  // the devices as their errors name them
      if (devices_.size() == opt_.devices.size())
        for (const auto& d : devices_) names.push_back(d->name());
      else  // creating them failed: only a worker fails there, and its name is its spec
        for (const auto& spec : opt_.devices) names.push_back(device::describe(spec));
      const std::optional<size_t> lost = lost_device(*failure, names);
      if (opt_.on_device_loss == OnDeviceLoss::Fail || !lost) throw *failure;
      ++device_losses_;
      report("lost device {}: [{}] {}", names[*lost], failure->origin(), failure->message());
      devices_.clear();  // ends every session: the workers left accept the new ones
      drop_device(*lost);
      // With no device left, workers lost before that answer again are the only way on: they are
      // tried whether or not --rejoin asked for it (the one just lost waits for a later try).
      if (opt_.rejoin || down()) readmit_answering(names[*lost]);
      if (down())  // the engine stays down until rejoin_lost brings a worker back
        throw Error(failure->origin(), failure->message() + " (no device is left to re-plan over)", failure->device(),
                    failure->blame());
    } else {
      devices_.clear();
      std::this_thread::sleep_for(kBusyRetry);
    }
    try {
      start_devices();
      replay();
      break;
    } catch (const Error& e) {
      failure = e;
    }
  }
  report_plan();
  report("recovered in {:.0f} ms ({} tokens of the KV cache replayed)",
         std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), held_tokens());
}

void Engine::report_plan() const {
  std::vector<std::string> names;
  for (const auto& d : devices_) names.push_back(d->name());
  report("re-planned over {} device{} (split {}): {}", names.size(), names.size() == 1 ? "" : "s",
         parallel::split_mode_name(plan_.mode), describe_split(names, opt_.ratios));
}

namespace {
// A device's hard limit, where it has one and knows it.
std::optional<uint64_t> hard_limit(const device::DeviceMemory& m) {
  if (m.known() && m.hard_limit) return m.free_bytes;
  return std::nullopt;
}
}  // namespace

parallel::Plan Engine::fitted_plan(const std::vector<double>& ratios) const {
  std::vector<std::optional<uint64_t>> limits;
  for (const auto& m : memory_) limits.push_back(hard_limit(m));
  const parallel::KvSizing kv = device::kv_sizing(load_options());
  return parallel::plan_within_memory(opt_.mode, graph_, model::weight_table(file_), ratios, opt_.moe_split, limits,
                                      kv);
}

void Engine::replan() {
  plan_ = split_written_
              ? parallel::make_plan(opt_.mode, graph_, model::weight_table(file_), opt_.ratios, opt_.moe_split)
              : fitted_plan(opt_.ratios);
}

void Engine::fit_to_device_memory() {
  WEFT_ASSERT(devices_.size() == memory_.size());
  bool changed = false;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const device::DeviceMemory m = devices_[i]->memory();
    changed |= hard_limit(m) != hard_limit(memory_[i]);
    memory_[i] = m;
  }
  if (changed) replan();
  constexpr double kMiB = 1024.0 * 1024;
  for (size_t i = 0; i < devices_.size(); ++i)
    if (plan_.memory_capped(i))
      report("{}: share {:.3f} instead of {:.3f}, so that its weights and KV cache fit its {:.1f} MiB free",
             devices_[i]->name(), plan_.ratios[i], plan_.asked_ratios[i], memory_[i].free_bytes / kMiB);
}

// Forgets device `index` and plans over the others, keeping their ratios. A worker is kept in
// lost_, with its ratio, to be retried (rejoin_lost, --rejoin); a local device does not come back.
void Engine::drop_device(size_t index) {
  if (opt_.devices[index].kind == device::DeviceSpec::Kind::Remote)
    lost_.push_back({opt_.devices[index], opt_.ratios[index]});
  opt_.devices.erase(opt_.devices.begin() + static_cast<std::ptrdiff_t>(index));
  opt_.ratios.erase(opt_.ratios.begin() + static_cast<std::ptrdiff_t>(index));
  memory_.erase(memory_.begin() + static_cast<std::ptrdiff_t>(index));
  // The devices left all had ratio 0 (-ts 1,0 and the 1 lost): share as without -ts instead.
  if (std::all_of(opt_.ratios.begin(), opt_.ratios.end(), [](double r) { return r <= 0; })) {
    opt_.ratios = device::default_ratios(opt_.devices);
    split_written_ = false;
  }
  // One device needs no split (and no collectives).
  if (opt_.devices.size() == 1) opt_.mode = parallel::SplitMode::None;
  if (!down()) replan();  // none left: nothing to plan until a worker rejoins
}

bool answers(const device::DeviceSpec& worker) {
  try {
    device::remote::probe_worker(worker.address, device::remote::coordinator_key());
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<std::string> Engine::lost_worker_names() const {
  std::vector<std::string> names;
  for (const auto& w : lost_) names.push_back(device::describe(w.spec));
  return names;
}

std::vector<device::DeviceSpec> Engine::lost_worker_specs() const {
  std::vector<device::DeviceSpec> specs;
  for (const auto& w : lost_) specs.push_back(w.spec);
  return specs;
}

size_t Engine::readmit_answering(const std::string& skip) {
  size_t back = 0;
  for (auto it = lost_.begin(); it != lost_.end();) {
    const std::string name = device::describe(it->spec);
    if (name == skip || !answers(it->spec)) {
      ++it;  // still gone: tried again at the next re-plan
      continue;
    }
    report("rejoined {}", name);
    opt_.devices.push_back(it->spec);
    opt_.ratios.push_back(it->ratio);
    memory_.push_back(device::spec_memory(it->spec));  // what it says once connected
    it = lost_.erase(it);
    ++back;
  }
  if (back == 0) return 0;
  if (opt_.devices.size() > 1)
    opt_.mode = mode_asked_ == parallel::SplitMode::None ? parallel::SplitMode::Tensor : mode_asked_;
  else  // back from none to one
    opt_.mode = parallel::SplitMode::None;
  replan();
  return back;
}

bool Engine::rejoin_lost() {
  if (lost_.empty() || readmit_answering("") == 0) return false;
  const auto t0 = Clock::now();
  devices_.clear();
  try {
    start_devices();
    replay();
  } catch (const Error& e) {
    recover(e);  // one that answered the probe but failed its load is lost again
    return true;
  }
  report_plan();
  report("rejoined in {:.0f} ms", std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  return true;
}

void Engine::check_idle_devices() {
  for (const auto& d : devices_) try {
      d->poll(0);  // without a step: throws only when the device is known to be gone
    } catch (const Error& e) {
      recover(e);
      return;  // recover replaced every device
    }
}

void Engine::replan_with(std::vector<double> ratios) {
  WEFT_ASSERT(ratios.size() == opt_.devices.size());
  const auto t0 = Clock::now();
  opt_.ratios = std::move(ratios);
  split_written_ = false;  // measured ratios: weft's choice, fitted into the devices' memory
  devices_.clear();        // ends every session: each worker accepts the new one once it has noticed
  replan();
  try {
    start_devices();
    replay();
  } catch (const Error& e) {
    recover(e);  // a worker still ending the old session is waited for; a lost device dropped
    return;      // recover reported the split it ended with
  }
  report("re-planned with ratios {} in {:.0f} ms ({} tokens of the KV cache replayed)", ratios_flag(plan_.ratios),
         std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), held_tokens());
}

size_t Engine::held_tokens() const {
  size_t n = 0;
  for (const auto& f : fed_) n += f.size();
  return n;
}

// Runs every slot's tokens through the new devices (their KV caches start empty), several slots
// to a step, n_batch tokens at most; nothing is sampled.
void Engine::replay() {
  forget_checkpoints();
  ++replays_;
  device::Step s;
  auto flush = [&] {
    if (!s.tokens.empty()) run_step(std::exchange(s, {}));
  };
  for (int32_t seq = 0; seq < opt_.n_seq; ++seq) {
    const std::vector<Token>& fed = fed_[seq];
    WEFT_ASSERT(static_cast<int32_t>(fed.size()) == n_past_[seq]);
    for (size_t at = 0; at < fed.size();) {
      const size_t room = static_cast<size_t>(opt_.n_batch) - s.tokens.size();
      if (room == 0) {
        flush();
        continue;
      }
      const size_t n = std::min(room, fed.size() - at);
      device::StepSeq q;
      q.seq = seq;
      q.pos0 = static_cast<int32_t>(at);
      q.n_tokens = static_cast<int32_t>(n);
      q.want_candidates = false;
      s.seqs.push_back(std::move(q));
      s.tokens.insert(s.tokens.end(), fed.begin() + static_cast<std::ptrdiff_t>(at),
                      fed.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
  }
  flush();
}

}  // namespace weft::runtime
