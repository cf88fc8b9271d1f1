// The coordinator side of a run: reads the model, plans the split, loads every device, and steps
// them together. Sampling is distributed: devices reduce their logits slices to candidates and
// only those cross to the coordinator.
#pragma once

#include "core/error.h"
#include "device/device.h"
#include "device/device_spec.h"
#include "device/kv_windows.h"
#include "graph/graph.h"
#include "model/constrained_sampling.h"
#include "model/logprobs.h"
#include "model/model_config.h"
#include "model/sampling.h"
#include "parallel/plan.h"
#include "runtime/balance.h"
#include "runtime/calibration.h"

#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace weft::runtime {

// What a step does when a device fails (its process killed, its host silent, a collective broken):
// Replan drops it, re-plans over the devices left and rebuilds every sequence's KV cache on them
// (see device_loss.h); Fail ends with the device's error, as before there was a choice.
enum class OnDeviceLoss { Replan, Fail };

// A step refused for what one of its sequences asked (sampling parameters the sampler cannot use,
// a slot that cannot hold its tokens): the request's fault, found before anything ran, never a
// device's. index: the sequence's entry in the batch, so a scheduler fails that request only.
class SequenceError : public Error {
 public:
  SequenceError(const Error& e, size_t index) : Error(e), index_(index) {}
  size_t index() const { return index_; }

 private:
  size_t index_;
};

struct EngineOptions {
  std::vector<device::DeviceSpec> devices;  // empty: one CPU device with all cores
  parallel::SplitMode mode = parallel::SplitMode::Tensor;
  parallel::MoeSplit moe_split = parallel::MoeSplit::Auto;  // how a tensor split cuts the experts
  std::vector<double> ratios;                               // empty: proportional to each device's threads
  // -ts auto: start from `ratios` (or threads), measure every device at load (calibration.h) and
  // re-plan with ratios proportional to the speeds measured.
  bool auto_ratios = false;
  int calibration_steps = 8;  // timed decode steps of that measurement (after two untimed ones)
  RebalancePolicy rebalance;  // --rebalance; its min_change also decides whether -ts auto re-plans
  int32_t n_ctx = 0;          // 0: min(training context, 4096)
  int32_t n_batch = 512;      // most tokens in one step (all sequences of a batch together)
  int32_t n_seq = 1;          // KV cache slots (sequences decoded together, -np); each holds n_ctx positions
  parallel::WireType wire = parallel::WireType::F32;
  bool map_weights = false;                            // CPU devices read weights from the file mapping (--mmap)
  DType k_type = DType::F16, v_type = DType::F16;      // KV cache (-ctk / -ctv)
  OnDeviceLoss on_device_loss = OnDeviceLoss::Replan;  // --on-device-loss
  bool rejoin = false;  // --rejoin: each re-plan also retries the workers lost before (see device_loss.h)
  // --exact: every split, ratio and re-plan gives the logits of one device, bit for bit
  // (device::LoadOptions::exact); CPU devices, dense models, the f32 wire.
  bool exact = false;
  // Recurrent models (Gated DeltaNet): states kept per slot (--ctx-checkpoints), each a copy of
  // the slot's state a few tokens before the end of a prompt (Engine::prompt_chunk), so that a
  // conversation whose template renders its last reply again differently (a reasoning model's
  // thinking dropped) continues from there instead of from its first token.
  int32_t ctx_checkpoints = 4;
};

// What every device of an engine with these options loads (opt.n_ctx resolved): the slots'
// context, how many, a step's most tokens, the KV types, --exact, and a recurrent model's
// checkpoint state slots.
inline device::LoadOptions load_options(const EngineOptions& opt, bool recurrent) {
  return {opt.n_ctx,
          opt.n_seq,
          opt.n_batch,
          opt.k_type,
          opt.v_type,
          opt.exact,
          recurrent ? opt.n_seq * opt.ctx_checkpoints : 0};
}

// One sequence's part of a batched step. Continuous batching: the sequences of several requests,
// each in its own KV cache slot, share one forward pass on every device, so each weight read
// serves all of them (still two all-reduces per dense layer per step, whatever the batch).
struct SeqStep {
  int32_t seq = 0;                 // KV cache slot, 0 .. n_seq-1
  std::span<const Token> tokens;   // appended at the slot's position, n_past(seq)
  bool sample = false;             // draw the token that follows the last one
  bool logits = false;             // return the full logits of the last one (tests, tools)
  model::SamplingParams sampling;  // sample: how
  std::span<const Token> recent;   // sample: the window the penalties look at
  std::mt19937_64* rng = nullptr;  // sample: this sequence's generator (greedy may leave it null)
  // Scoring (perplexity): the log-probability of score_next[k] after tokens[0 .. score_from + k],
  // reduced on the devices from their vocabulary slices (no logits gathered).
  int32_t score_from = 0;
  std::span<const Token> score_next;
  // sample and >= 0: the drawn token's log-probability and the top_logprobs most likely tokens'
  // (0..model::kMaxTopLogprobs), reduced on the devices (model/logprobs.h); -1: none, no cost.
  int32_t top_logprobs = -1;
  // sample: only a token this grammar allows (model/constrained_sampling.h). The caller accept()s
  // the drawn token. When none of the devices' top candidates is allowed, the step re-runs that
  // sequence's last token with whole vocabulary slices (the slot forgets from that position on).
  const model::GrammarConstraint* constraint = nullptr;
  // Keep the slot's state at n_past(seq), before these tokens, as one of its checkpoints (a
  // recurrent model with --ctx-checkpoints; nothing otherwise).
  bool checkpoint = false;
};
struct SeqOutput {
  Token token = -1;                              // sample: the drawn token
  std::vector<float> logits;                     // logits: [n_vocab]
  std::vector<double> log_probs;                 // one per score_next
  std::optional<model::TokenLogprobs> logprobs;  // top_logprobs >= 0
  std::string error;                             // constraint: no token of the whole vocabulary continues it (token -1)
};

class Engine {
 public:
  Engine(const gguf::File& file, EngineOptions opt);
  ~Engine();

  const model::ModelConfig& config() const { return config_; }
  const graph::Graph& graph() const { return graph_; }
  const parallel::Plan& plan() const { return plan_; }
  int32_t n_ctx() const { return opt_.n_ctx; }
  int32_t n_past() const { return n_past_[0]; }
  int32_t n_past(int32_t seq) const;
  int32_t n_seq() const { return opt_.n_seq; }
  int32_t n_batch() const { return opt_.n_batch; }
  const std::vector<std::unique_ptr<device::Device>>& devices() const { return devices_; }
  // Devices dropped so far (each re-plan drops one; see device_loss.h).
  int device_losses() const { return device_losses_; }
  // Workers lost and not back yet, and their names ("tcp://host:port").
  size_t lost_workers() const { return lost_.size(); }
  std::vector<std::string> lost_worker_names() const;
  std::vector<device::DeviceSpec> lost_worker_specs() const;  // to probe them elsewhere (see answers())
  // No device is left: every one was lost (the step that lost the last one threw). Only
  // rejoin_lost brings the engine back; until then a step is an error.
  bool down() const { return opt_.devices.empty(); }
  // Retries the lost workers: those that answer a handshake rejoin, and the engine re-plans over
  // them and the live devices (the device-loss machinery: reload, replay). Returns whether any
  // rejoined. `weft serve` calls it at step boundaries (also while down); a re-plan calls it under
  // opt.rejoin, and a loss that leaves no device always does.
  bool rejoin_lost();
  // Between steps: looks for devices found dead while idle (a worker whose connection closed) and
  // re-plans around them as a failed step would; throws as a step would when none is left.
  void check_idle_devices();
  // -ts auto: what the load-time calibration measured and chose (empty devices otherwise).
  const Calibration& calibration() const { return calibration_; }
  // Re-plans made by --rebalance so far.
  int rebalances() const { return rebalances_; }

  // Feeds tokens at the current position (in n_batch chunks) and draws the next token.
  Token eval_and_sample(std::span<const Token> tokens, const model::SamplingParams& p, std::span<const Token> recent,
                        std::mt19937_64& rng);
  // Feeds tokens and returns the full logits of the last one (gathered: for tests and tools).
  std::vector<float> eval_logits(std::span<const Token> tokens);
  // One forward pass over every sequence of `batch` (distinct slots; at most n_batch tokens in
  // all; each slot keeps n_ctx positions at most). One SeqOutput per entry, in order.
  std::vector<SeqOutput> step_batch(std::span<const SeqStep> batch);
  // Starts a new sequence (slot 0).
  void reset() { truncate(0); }
  // Forgets every position of slot `seq` from n_keep on (n_keep <= n_past(seq)): its next token
  // goes at n_keep. Costs nothing on the devices: the next step of the slot says where it writes.
  void truncate(int32_t n_keep) { truncate(0, n_keep); }
  void truncate(int32_t seq, int32_t n_keep);
  // The most of a slot's first n_keep positions it can continue from: n_keep, or 0 where a
  // sliding-window layer no longer holds the keys position n_keep needs (graph/kv_window.h); a
  // recurrent state (Gated DeltaNet) past n_keep continues from the latest of its checkpoints
  // at or before n_keep (0: none).
  int32_t resumable(int32_t seq, int32_t n_keep) const;
  // A prompt of prompt_end tokens fed to slot `seq` from position `at`, at most n tokens a step:
  // how many the next step takes, and whether it keeps the state it starts from as a checkpoint
  // (SeqStep::checkpoint). A recurrent model's prompt is cut 4 tokens before its end, which a chat
  // template's next render most often keeps (llama.cpp's server makes the same choice); not with
  // --ctx-checkpoints 0, under 64 tokens, or where one is kept there already.
  struct PromptChunk {
    size_t n = 0;
    bool checkpoint = false;
  };
  PromptChunk prompt_chunk(int32_t seq, int32_t at, int32_t prompt_end, size_t n) const;

 private:
  device::LoadOptions load_options() const { return runtime::load_options(opt_, config_.dims.recurrent()); }
  // Creates the devices of opt_.devices, checks each runs its part of plan_, joins and loads them.
  void start_devices();
  void open_devices();   // start_devices' first half: creating (a worker's handshake) and checking
  void join_and_load();  // and its second: the group joined, every device loaded
  int32_t check_sequence(const SeqStep& q, size_t index, std::vector<bool>& busy) const;
  std::vector<device::StepResult> run_step(device::Step s);
  void wait_all(std::vector<device::StepResult>& results);
  SeqOutput eval(std::span<const Token> tokens, SeqStep last);
  // Recovery from device loss (device_loss.cpp): run_step, and while a device fails and the
  // policy allows it, drop the device, re-plan, replay every slot's tokens and run the step again.
  std::vector<device::StepResult> run_step_surviving(const device::Step& s);
  void sample_whole_vocabulary(std::span<const SeqStep> batch, const std::vector<size_t>& which,
                               std::vector<SeqOutput>& out);
  void recover(const Error& cause);
  void drop_device(size_t index);
  // Appends the lost workers that answer a probe (but `skip`, just lost) and re-plans; their count.
  size_t readmit_answering(const std::string& skip);
  // Plans opt_.ratios over opt_.devices; a split weft chose (not one -ts wrote) is fitted into
  // the devices' hard memory limits as memory_ knows them (parallel/memory_fit.h).
  void replan();
  // The plan of ratios fitted into memory_ (what replan makes of ratios weft chose): calibration
  // and --rebalance compare it, not the ratios, with the current plan, so a device its memory
  // caps does not make them re-plan to the same split again and again.
  parallel::Plan fitted_plan(const std::vector<double>& ratios) const;
  // After the devices are created: their memory as they say it (a worker's from its DeviceInfo);
  // re-plans when a limit differs from what the plan assumed, and reports shares it lowered.
  void fit_to_device_memory();
  void report_plan() const;
  void replay();
  size_t held_tokens() const;  // in every slot's KV cache: what a replay runs
  // Same devices, new ratios (-ts auto, --rebalance): re-plan, load afresh and replay, through the
  // machinery of a device loss (device_loss.cpp); a device lost on the way is recovered from as there.
  void replan_with(std::vector<double> ratios);
  // Self-balancing (calibration.cpp): measure at load; watch each step's compute times.
  Calibration measure(int n_steps);
  void calibrate();
  void observe_step();
  std::vector<double> compute_seconds() const;  // each device's compute so far, collectives excluded

  const gguf::File& file_;
  EngineOptions opt_;
  // -ts gave the ratios (not auto) and nothing re-planned them since: planned as written, and a
  // device past its hard memory limit is refused at load rather than given a share -ts did not say.
  bool split_written_ = false;
  std::vector<device::DeviceMemory> memory_;  // per opt_.devices entry: what the plan fits into
  model::ModelConfig config_;
  graph::Graph graph_;
  parallel::Plan plan_;
  std::vector<std::unique_ptr<device::Device>> devices_;
  std::vector<int32_t> n_past_;          // per slot
  std::vector<std::vector<Token>> fed_;  // per slot: the n_past_ tokens its KV cache holds (for a replay)
  // Recurrent models: per slot, the checkpoints kept (oldest first) in its ctx_checkpoints state
  // slots on the devices (after the n_seq sequences'), and the state slot its next step starts
  // from instead of its own (-1: its own). A replay (new devices) forgets them.
  struct Checkpoint {
    int32_t pos = 0, state_slot = 0;
  };
  std::vector<std::vector<Checkpoint>> checkpoints_;
  std::vector<int32_t> restore_;
  int replays_ = 0;
  int32_t checkpoints_per_slot() const { return load_options().n_checkpoints / opt_.n_seq; }
  int32_t checkpoint_slot(int32_t seq, int32_t pos) const;             // the state slot a checkpoint at pos goes to
  int32_t checkpoint_position(int32_t seq, int32_t prompt_end) const;  // where prompt_chunk cuts (-1: nowhere)
  void forget_checkpoints();
  device::KvWindows windows_;  // per slot: where the devices' sliding-window caches start
  int device_losses_ = 0;
  parallel::SplitMode mode_asked_;  // opt_.mode before losses brought it down to one device
  struct LostWorker {
    device::DeviceSpec spec;
    double ratio = 0;
  };
  std::vector<LostWorker> lost_;
  Calibration calibration_;
  StepTimes step_times_;              // --rebalance: the current window
  std::vector<double> compute_base_;  // compute_seconds() after the last step watched; empty after a load
  int rebalances_ = 0;
};

}  // namespace weft::runtime
