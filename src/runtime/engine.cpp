#include "runtime/engine.h"

#include "core/error.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "device/device_group.h"
#include "model/llama_graph.h"
#include "parallel/planner.h"
#include "runtime/report.h"

#include <algorithm>
#include <cstdio>

namespace weft::runtime {

using parallel::SplitMode;

Engine::Engine(const gguf::File& file, EngineOptions opt) : file_(file), opt_(std::move(opt)) {
  config_ = model::read_config(file_);
  if (opt_.devices.empty()) opt_.devices.push_back({device::DeviceSpec::Kind::Cpu, hardware_cores(), -1, ""});
  const size_t n = opt_.devices.size();
  if (opt_.mode == SplitMode::None && n > 1) opt_.devices.resize(1);
  split_written_ = !opt_.ratios.empty() && !opt_.auto_ratios && opt_.mode != SplitMode::None;
  if (opt_.ratios.empty() || opt_.mode == SplitMode::None) opt_.ratios = device::default_ratios(opt_.devices);
  if (opt_.ratios.size() != opt_.devices.size())
    fail("cli", "--tensor-split has {} values for {} devices", opt_.ratios.size(), opt_.devices.size());
  if (opt_.n_ctx <= 0) opt_.n_ctx = static_cast<int32_t>(std::min<int64_t>(config_.n_ctx_train, 4096));
  if (opt_.n_ctx > config_.n_ctx_train && config_.n_ctx_train > 0 && !log_disabled())  // as llama_context says
    std::fprintf(stderr,
                 "[engine] warning: n_ctx_per_seq (%d) > n_ctx_train (%lld) -- possible training context overflow\n",
                 opt_.n_ctx, static_cast<long long>(config_.n_ctx_train));
  config_ = model::for_context(std::move(config_), opt_.n_ctx);  // LongRoPE: a slot's context picks the factors
  graph_ = model::build_llama_graph(config_);
  // --exact with --mmap: the weights the kernels repack are copied into panels anyway (as a split's
  // column slices always are), so that one device and any split run the same kernels.
  if (opt_.exact && opt_.map_weights && !log_disabled())
    std::fprintf(stderr, "[engine] --exact: weights the kernels repack are copied at load; the rest stays mapped\n");
  if (opt_.exact && opt_.wire != parallel::WireType::F32)
    fail("cli", "--exact moves fixed-point sums, not --wire {}", parallel::wire_type_name(opt_.wire));
  if (opt_.n_batch <= 0) fail("cli", "--batch-size must be positive");
  if (opt_.n_seq <= 0 || opt_.n_seq > 1024) fail("cli", "--parallel {} outside 1..1024", opt_.n_seq);
  if (opt_.ctx_checkpoints < 0 || opt_.ctx_checkpoints > 64)
    fail("cli", "--ctx-checkpoints {} outside 0..64", opt_.ctx_checkpoints);
  n_past_.assign(opt_.n_seq, 0);
  fed_.assign(opt_.n_seq, {});
  checkpoints_.assign(opt_.n_seq, {});
  restore_.assign(opt_.n_seq, -1);
  windows_ = device::KvWindows(config_.dims, load_options());

  mode_asked_ = opt_.mode;
  for (const auto& spec : opt_.devices) memory_.push_back(device::spec_memory(spec));  // a worker's: at connect
  replan();
  // A worker that cannot be reached or refuses the handshake is a start-up error (a mistyped
  // address is never silently dropped); one that answered and then fails while joining or loading
  // is a device loss like any later one.
  open_devices();
  try {
    join_and_load();
  } catch (const Error& e) {
    recover(e);
  }
  if (opt_.auto_ratios) calibrate();
  if (checkpoints_per_slot() > 0) {
    uint64_t values = 0;
    for (const auto& d : plan_.devices) values += d.state_values_per_slot;
    report("recurrent state {:.1f} MiB a slot; --ctx-checkpoints keeps {} more a slot ({:.1f} MiB in all)",
           values * 4 / 1048576.0, checkpoints_per_slot(),
           values * 4.0 * opt_.n_seq * checkpoints_per_slot() / 1048576.0);
  }
}

Engine::~Engine() = default;

void Engine::start_devices() {
  open_devices();
  join_and_load();
}

void Engine::open_devices() {
  compute_base_.clear();  // new devices: --rebalance starts watching afresh
  step_times_.clear();
  devices_ = device::create_devices(opt_.devices, opt_.map_weights, opt_.exact);
  fit_to_device_memory();
  for (const auto& dg : plan_.devices)
    for (const auto& ln : dg.nodes) {
      const DType t =
          ln.weight.kind != parallel::WeightSlice::Kind::None ? file_.tensor(ln.weight.tensor).type : DType::F32;
      if (!devices_[dg.device]->supports(ln.op, t))
        fail("engine", "{} cannot run {} on {} weights ({})", devices_[dg.device]->name(),
             parallel::local_op_name(ln.op), dtype_name(t), ln.weight.tensor);
    }
}

void Engine::join_and_load() {
  if (plan_.mode == SplitMode::Tensor) device::connect_group(devices_, opt_.wire);
  const device::LoadOptions lo = load_options();
  device::load_devices(devices_, plan_.devices, file_, lo);
  // Every device holds its own copy now (only --mmap reads the mapping from here on).
  if (!opt_.map_weights) file_.release_data();
}

int32_t Engine::n_past(int32_t seq) const {
  if (seq < 0 || seq >= opt_.n_seq) fail("engine", "sequence slot {} outside 0..{}", seq, opt_.n_seq - 1);
  return n_past_[seq];
}

int32_t Engine::resumable(int32_t seq, int32_t n_keep) const {
  // A recurrent state (Gated DeltaNet) is held at the slot's last position, and its checkpoints'.
  if (n_keep > 0 && config_.dims.recurrent() && n_keep != n_past(seq)) {
    int32_t best = 0;
    for (const Checkpoint& c : checkpoints_[seq])
      if (c.pos <= n_keep) best = std::max(best, c.pos);
    n_keep = best;
  }
  if (n_keep <= 0 || !windows_.active()) return std::max(n_keep, 0);
  return n_keep >= windows_.floor(seq) ? n_keep : 0;
}

int32_t Engine::checkpoint_position(int32_t seq, int32_t prompt_end) const {
  constexpr int32_t kBeforeEnd = 4, kMinPrompt = 64;
  if (checkpoints_per_slot() == 0 || prompt_end < kMinPrompt) return -1;
  const int32_t pos = prompt_end - kBeforeEnd;
  for (const Checkpoint& c : checkpoints_.at(seq))
    if (c.pos == pos) return -1;
  return pos;
}

Engine::PromptChunk Engine::prompt_chunk(int32_t seq, int32_t at, int32_t prompt_end, size_t n) const {
  const int32_t cut = checkpoint_position(seq, prompt_end);
  if (cut > at && cut < at + static_cast<int64_t>(n)) n = static_cast<size_t>(cut - at);
  return {n, cut == at};
}

int32_t Engine::checkpoint_slot(int32_t seq, int32_t pos) const {
  const auto& held = checkpoints_[seq];
  for (const Checkpoint& c : held)
    if (c.pos == pos) return c.state_slot;
  const int32_t first = opt_.n_seq + seq * checkpoints_per_slot();
  if (static_cast<int32_t>(held.size()) == checkpoints_per_slot()) return held.front().state_slot;  // the oldest
  for (int32_t s = first;; ++s)
    if (std::ranges::none_of(held, [&](const Checkpoint& c) { return c.state_slot == s; })) return s;
}

void Engine::forget_checkpoints() {
  for (auto& c : checkpoints_) c.clear();
  std::ranges::fill(restore_, -1);
}

void Engine::truncate(int32_t seq, int32_t n_keep) {
  if (n_keep < 0 || n_keep > n_past(seq))
    fail("engine", "truncate slot {} to {} positions, {} held", seq, n_keep, n_past_[seq]);
  if (resumable(seq, n_keep) != n_keep) {
    if (config_.dims.recurrent())
      fail("engine", "slot {}: its recurrent state is at position {}, not {}; continue there, or from 0", seq,
           n_past_[seq], n_keep);
    fail("engine",
         "slot {}: its sliding-window layers no longer hold the keys position {} needs; continue from {} on, "
         "or from 0",
         seq, n_keep, windows_.floor(seq));
  }
  if (n_keep != n_past_[seq]) {
    restore_[seq] = -1;  // from 0 the state starts over; n_keep itself: the slot's own state
    if (config_.dims.recurrent() && n_keep > 0)
      for (const Checkpoint& c : checkpoints_[seq])
        if (c.pos == n_keep) restore_[seq] = c.state_slot;
  }
  std::erase_if(checkpoints_[seq], [&](const Checkpoint& c) { return c.pos > n_keep; });  // another future's
  n_past_[seq] = n_keep;
  fed_[seq].resize(n_keep);
}

std::vector<device::StepResult> Engine::run_step(device::Step s) {
  std::vector<device::StepResult> results(devices_.size());
  std::vector<int64_t> windows = windows_.advance(s, "engine");  // as every device moves its own
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
  windows_.commit(std::move(windows));
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

// What one sequence of a batch asks, checked before the step runs: a SequenceError, never a step
// that fails on the devices (which would count as their loss). Returns the tokens its slot holds.
int32_t Engine::check_sequence(const SeqStep& q, size_t index, std::vector<bool>& busy) const {
  try {
    const int32_t held = n_past(q.seq);
    if (busy[q.seq]) fail("engine", "sequence slot {} twice in one batch", q.seq);
    busy[q.seq] = true;
    if (q.tokens.empty()) fail("engine", "slot {}: nothing to evaluate", q.seq);
    if (held + static_cast<int64_t>(q.tokens.size()) > opt_.n_ctx)
      fail("engine", "context is full: slot {} holds {} + {} tokens, over -c {}", q.seq, held, q.tokens.size(),
           opt_.n_ctx);
    if (q.sample) model::validate(q.sampling);
    if (q.top_logprobs < -1 || q.top_logprobs > model::kMaxTopLogprobs)
      fail("engine", "slot {}: top_logprobs {} outside -1..{}", q.seq, q.top_logprobs, model::kMaxTopLogprobs);
    if (q.sample && q.sampling.temp > 0.f && !q.rng) fail("engine", "slot {}: sampling needs a generator", q.seq);
    return held;
  } catch (const Error& e) {
    throw SequenceError(e, index);
  }
}

std::vector<SeqOutput> Engine::step_batch(std::span<const SeqStep> batch) {
  if (batch.empty()) fail("engine", "an empty batch");
  if (down()) fail("engine", "no device is up (every one was lost; the lost workers are retried)");
  device::Step s;
  std::vector<bool> busy(opt_.n_seq, false);
  std::vector<std::pair<int32_t, Checkpoint>> kept;  // checkpoints this step makes, per slot
  for (size_t k = 0; k < batch.size(); ++k) {
    const SeqStep& q = batch[k];
    const int32_t held = check_sequence(q, k, busy);
    if (restore_[q.seq] >= 0) s.state_copies.push_back({restore_[q.seq], q.seq});
    if (q.checkpoint && checkpoints_per_slot() > 0 && held > 0) {
      const Checkpoint c{held, checkpoint_slot(q.seq, held)};
      s.state_copies.push_back({q.seq, c.state_slot});
      kept.emplace_back(q.seq, c);
    }
    device::StepSeq d;
    d.seq = q.seq;
    d.pos0 = held;
    d.n_tokens = static_cast<int32_t>(q.tokens.size());
    d.want_candidates = q.sample;
    d.want_logits = q.logits;
    d.sampling = q.sample && q.constraint ? model::constrained_device_params(q.sampling, false) : q.sampling;
    d.keep_logits = q.sample && q.constraint;  // for sample_whole_vocabulary
    if (q.sample) d.recent.assign(q.recent.begin(), q.recent.end());
    if (q.sample) d.n_logprobs = q.top_logprobs;
    d.score_from = q.score_from;
    d.score_next.assign(q.score_next.begin(), q.score_next.end());
    s.seqs.push_back(std::move(d));
    s.tokens.insert(s.tokens.end(), q.tokens.begin(), q.tokens.end());
  }
  if (static_cast<int64_t>(s.tokens.size()) > opt_.n_batch)
    fail("engine", "a batch of {} tokens exceeds --batch-size {}", s.tokens.size(), opt_.n_batch);
  const int replays = replays_;
  auto results = run_step_surviving(s);
  if (replays_ == replays) {  // else new devices: the states were replayed, the checkpoints are gone
    for (const SeqStep& q : batch) restore_[q.seq] = -1;
    for (const auto& [seq, c] : kept) {
      auto& held = checkpoints_[seq];
      std::erase_if(held, [&](const Checkpoint& h) { return h.pos == c.pos || h.state_slot == c.state_slot; });
      held.push_back(c);
    }
  }
  std::vector<SeqOutput> out(batch.size());
  std::vector<size_t> whole;  // constrained sequences none of whose candidates the grammar allows
  for (size_t k = 0; k < batch.size(); ++k) {
    const SeqStep& q = batch[k];
    n_past_[q.seq] += static_cast<int32_t>(q.tokens.size());
    fed_[q.seq].insert(fed_[q.seq].end(), q.tokens.begin(), q.tokens.end());
    if (q.logits) out[k].logits.assign(config_.dims.n_vocab, 0.f);
    std::vector<model::LocalCandidates> parts;
    std::vector<model::SliceLogprobs> logprobs;                               // q.top_logprobs >= 0
    std::vector<std::vector<model::SliceScore>> scores(q.score_next.size());  // per row, every slice
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& dg = plan_.devices[i];
      if (!dg.has_logits) continue;
      if (results[i].seqs.size() != batch.size())
        fail("engine", "{} returned {} sequences for {}", devices_[i]->name(), results[i].seqs.size(), batch.size());
      device::SeqResult& r = results[i].seqs[k];
      if (q.sample) parts.push_back(std::move(r.candidates));
      if (q.sample && q.top_logprobs >= 0) {
        if (!r.logprobs) fail("engine", "{} returned no log-probabilities", devices_[i]->name());
        logprobs.push_back(std::move(*r.logprobs));
      }
      if (r.scores.size() != scores.size())
        fail("engine", "{} returned {} scores for {}", devices_[i]->name(), r.scores.size(), scores.size());
      for (size_t j = 0; j < scores.size(); ++j) scores[j].push_back(r.scores[j]);
      if (q.logits) {
        if (static_cast<int64_t>(r.logits.size()) != dg.vocab.size())
          fail("engine", "{} returned {} logits for a slice of {}", devices_[i]->name(), r.logits.size(),
               dg.vocab.size());
        std::copy(r.logits.begin(), r.logits.end(), out[k].logits.begin() + dg.vocab.begin);
      }
    }
    for (const auto& row : scores) out[k].log_probs.push_back(model::merge_log_prob(row));
    if (q.sample && q.constraint) {
      std::mt19937_64 unused;
      auto t = model::sample_constrained(parts, q.sampling, q.rng ? *q.rng : unused, *q.constraint);
      if (!t) {
        whole.push_back(k);
        continue;
      }
      out[k].token = *t;
      if (q.top_logprobs >= 0) out[k].logprobs = model::merge_logprobs(logprobs, parts, *t, q.top_logprobs);
    } else if (q.sample) {
      std::mt19937_64 unused;  // greedy draws nothing
      if (q.top_logprobs < 0) {
        out[k].token = model::sample(std::move(parts), q.sampling, q.rng ? *q.rng : unused);
      } else {  // the candidates are read again for the drawn token's raw logit
        out[k].token = model::sample(parts, q.sampling, q.rng ? *q.rng : unused);
        out[k].logprobs = model::merge_logprobs(logprobs, parts, out[k].token, q.top_logprobs);
      }
    }
  }
  if (!whole.empty()) sample_whole_vocabulary(batch, whole, out);
  observe_step();  // last: a rebalance re-plans and replays what this step fed too
  return out;
}

// The constrained sequences whose devices' top candidates the grammar refused all: the grammar's
// choice among every token it might allow (GrammarConstraint::plausible), their logits read from
// what the devices kept of the step just run. Where a device was lost meanwhile, the new ones kept
// nothing: each sequence's last token runs again at its position (the slot forgets from there, so
// nothing is fed twice).
void Engine::sample_whole_vocabulary(std::span<const SeqStep> batch, const std::vector<size_t>& which,
                                     std::vector<SeqOutput>& out) {
  const char* kNone = "no token of the vocabulary continues the grammar (the output so far cannot be completed)";
  device::Step s;
  s.reread = true;
  std::vector<size_t> asked;  // entries of `which` with a token to look at
  for (size_t k : which) {
    const SeqStep& q = batch[k];
    device::StepSeq d;
    d.candidate_ids = q.constraint->plausible();
    if (d.candidate_ids.empty()) {
      out[k].error = kNone;
      continue;
    }
    d.seq = q.seq;
    d.pos0 = n_past_[q.seq];
    d.n_tokens = 0;
    d.sampling = model::constrained_device_params(q.sampling, true);
    d.recent.assign(q.recent.begin(), q.recent.end());
    d.n_logprobs = q.top_logprobs;
    s.seqs.push_back(std::move(d));
    asked.push_back(k);
  }
  if (asked.empty()) return;
  std::vector<device::StepResult> results(devices_.size());
  try {
    for (auto& d : devices_) d->submit(s);
    wait_all(results);
  } catch (const Error& e) {
    recover(e);
    s.reread = false;
    for (device::StepSeq& d : s.seqs) {
      d.pos0 = n_past_[d.seq] - 1;
      d.n_tokens = 1;
      s.tokens.push_back(fed_[d.seq].back());
    }
    results = run_step_surviving(s);
  }
  for (size_t j = 0; j < asked.size(); ++j) {
    const SeqStep& q = batch[asked[j]];
    std::vector<model::Candidate> plausible;
    std::vector<model::SliceLogprobs> logprobs;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!plan_.devices[i].has_logits) continue;
      if (results[i].seqs.size() != asked.size())
        fail("engine", "{} returned {} sequences for {}", devices_[i]->name(), results[i].seqs.size(), asked.size());
      device::SeqResult& r = results[i].seqs[j];
      plausible.insert(plausible.end(), r.candidates.top.begin(), r.candidates.top.end());
      if (q.top_logprobs >= 0) {
        if (!r.logprobs) fail("engine", "{} returned no log-probabilities", devices_[i]->name());
        logprobs.push_back(std::move(*r.logprobs));
      }
    }
    if (plausible.size() != s.seqs[j].candidate_ids.size())
      fail("engine", "the devices returned {} of {} tokens' logits", plausible.size(), s.seqs[j].candidate_ids.size());
    std::mt19937_64 unused;
    auto c = model::sample_constrained_whole(plausible, q.sampling, q.rng ? *q.rng : unused, *q.constraint);
    SeqOutput& o = out[asked[j]];
    if (!c) {
      o.error = kNone;
      continue;
    }
    o.token = c->id;
    if (q.top_logprobs >= 0)
      o.logprobs = model::merge_logprobs(logprobs, std::vector<model::LocalCandidates>{{{*c}}}, c->id, q.top_logprobs);
  }
}

// One sequence in slot 0, its tokens in n_batch chunks; the last chunk samples or returns logits.
SeqOutput Engine::eval(std::span<const model::Token> tokens, SeqStep last) {
  if (tokens.empty()) fail("engine", "nothing to evaluate");
  if (n_past_[0] + static_cast<int64_t>(tokens.size()) > opt_.n_ctx)
    fail("engine", "context is full: {} + {} tokens exceed -c {}", n_past_[0], tokens.size(), opt_.n_ctx);
  // A prompt (what draws a token) is cut where a checkpoint is worth keeping.
  const int32_t start = n_past_[0], end = start + static_cast<int32_t>(tokens.size());
  for (size_t i = 0;;) {
    const size_t most = std::min<size_t>(opt_.n_batch, tokens.size() - i);
    const PromptChunk c =
        last.sample ? prompt_chunk(0, start + static_cast<int32_t>(i), end, most) : PromptChunk{most, false};
    SeqStep q;
    if (i + c.n == tokens.size()) q = last;
    q.seq = 0;
    q.tokens = tokens.subspan(i, c.n);
    q.checkpoint = c.checkpoint;
    auto out = step_batch({&q, 1});
    i += c.n;
    if (i == tokens.size()) return std::move(out[0]);
  }
}

model::Token Engine::eval_and_sample(std::span<const model::Token> tokens, const model::SamplingParams& p,
                                     std::span<const model::Token> recent, std::mt19937_64& rng) {
  SeqStep last;
  last.sample = true;
  last.sampling = p;
  last.recent = recent;
  last.rng = &rng;
  return eval(tokens, last).token;
}

std::vector<float> Engine::eval_logits(std::span<const model::Token> tokens) {
  SeqStep last;
  last.logits = true;
  return std::move(eval(tokens, last).logits);
}

}  // namespace weft::runtime
