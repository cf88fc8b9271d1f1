// The Device interface every device kind implements (CPU now; remote workers and GPUs later).
// A device holds the weights and KV cache of its slice of the model and runs its per-device graph
// from the split plan, one step at a time; collectives connect it to its peers while it runs.
#pragma once

#include "core/dtype.h"
#include "core/token.h"
#include "gguf/gguf_reader.h"
#include "model/logprobs.h"
#include "model/sampling.h"
#include "model/scoring.h"
#include "parallel/group.h"
#include "parallel/memory_fit.h"
#include "parallel/plan.h"

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::device {

struct LoadOptions {
  int32_t n_ctx = 2048;                            // KV cache positions of each sequence slot
  int32_t n_seq = 1;                               // sequence slots (continuous batching)
  int32_t max_tokens = 512;                        // most tokens in one step, all sequences together
  DType k_type = DType::F16, v_type = DType::F16;  // KV cache element types: F16 or F32 (-ctk / -ctv)
  // --exact: the reductions a split cuts (LocalNode::granule) summed in fixed point, so that any
  // split, ratio or re-plan gives the bits of one device (kernels/fixed_point.h).
  bool exact = false;
  // Recurrent graphs (Gated DeltaNet): state slots besides the sequences' own, which hold copies
  // of a sequence's state at a position (checkpoints: Step::state_copies).
  int32_t n_checkpoints = 0;
  int32_t state_slots() const { return n_seq + n_checkpoints; }
};
// What sizes the KV caches a load of these options holds (parallel::kv_cache_bytes).
inline parallel::KvSizing kv_sizing(const LoadOptions& o) {
  return {int64_t{o.n_ctx} * o.n_seq, o.k_type, o.v_type, o.n_seq, o.max_tokens, o.n_checkpoints};
}

// One sequence's part of a step: its next n_tokens tokens of Step::tokens go at positions pos0,
// pos0+1, ... of KV slot `seq`. The slot forgets whatever it held from pos0 on, so a finished
// sequence's slot is reused, and a conversation rewound, without a message of its own.
struct StepSeq {
  int32_t seq = 0;
  int32_t pos0 = 0;
  int32_t n_tokens = 0;
  // What the device returns for the sequence's last token besides running the graph:
  bool want_candidates = true;  // sampling stage 1 on its logits slice
  bool want_logits = false;     // the logits slice itself (tests, tools)
  model::SamplingParams sampling;
  std::vector<Token> recent;  // for the penalties
  // >= 0: also the slice's log-sum-exp and its n_logprobs (0..kMaxTopLogprobs) top raw logits
  // (model/logprobs.h); -1: not asked, and nothing more computed.
  int32_t n_logprobs = -1;
  // Scoring (perplexity): row score_from + k of this sequence is scored against score_next[k],
  // the token that follows it, over the device's vocabulary slice (see model/scoring.h).
  int32_t score_from = 0;
  std::vector<Token> score_next;
  // The device keeps its last row's logits slice until its next step, for a Step::reread.
  bool keep_logits = false;
  // Not empty: the candidates are these tokens of the slice instead of its top, each with its
  // penalised logit, in the order listed (a constrained sequence's plausible tokens).
  std::vector<Token> candidate_ids;
};

// A recurrent state copied from one state slot to another with the position it is at: slots
// 0..n_seq-1 are the sequences', n_seq.. the checkpoints (LoadOptions::n_checkpoints).
struct StateCopy {
  int32_t from = 0, to = 0;
};

// One forward step over one or more sequences (every matmul reads its weights once for all).
struct Step {
  std::vector<Token> tokens;  // the sequences' tokens, one sequence after another
  std::vector<StepSeq> seqs;  // in the order of their tokens
  std::vector<float> input;   // layer split, devices after the first: residual stream [n_tokens, n_embd]
  // No graph: each sequence's candidates (and log-probabilities) again, under its new sampling
  // parameters, from the logits slice the device's last step kept for it (StepSeq::keep_logits).
  // tokens is empty and every n_tokens 0; the caches are untouched.
  bool reread = false;
  // Before the graph, in order: a sequence's state kept as a checkpoint, or a checkpoint taken
  // back so that the sequence continues from its position (a conversation whose last turn the
  // template rendered again differently).
  std::vector<StateCopy> state_copies;

  // A step of one sequence in slot 0 (generation of one prompt, tests).
  static Step single(std::vector<Token> tokens, int32_t pos0, bool want_candidates = true, bool want_logits = false);
};

struct SeqResult {  // one per StepSeq, in order; empty where nothing was wanted
  model::LocalCandidates candidates;
  std::vector<float> logits;                     // want_logits: this device's vocab slice
  std::vector<model::SliceScore> scores;         // one per score_next
  std::optional<model::SliceLogprobs> logprobs;  // n_logprobs >= 0
};

struct StepResult {
  std::vector<SeqResult> seqs;  // devices holding logits; others return none
  std::vector<float> output;    // layer split, not the last device: residual stream out
};

// A network group's meeting point: the coordinator's rendezvous store and what a rank in the
// coordinator's process needs to connect (a worker decides those for itself).
struct NetworkGroup {
  std::string store;               // HOST:PORT of the rendezvous store
  std::string prefix;              // this group's keys in it (unique per group)
  std::vector<uint8_t> store_key;  // authenticates store entries (empty: none)
  std::string host;                // the address peers reach a rank of this process at
  bool busy_poll = false;          // see parallel::NetPoll
  int timeout_ms = 30000;          // connecting, and each collective
  bool host_shm = true;            // see parallel::GlooOptions::host_shm (the coordinator's --net-shm)
};

// How a device joins a tensor-parallel group (see device_group.h, which fills it). A group whose
// devices all live in this process shares memory; one that spans processes runs every rank on the
// network, through the coordinator's rendezvous store.
struct GroupJoin {
  int rank = 0, size = 1;
  parallel::WireType wire = parallel::WireType::F32;
  std::unique_ptr<parallel::Group> shared;  // set: this rank's handle of an in-process group
  NetworkGroup net;                         // otherwise
};

// Where a device computes, as far as group wiring cares (device_group.h's choose_group reads it).
struct Reach {
  bool in_process = true;  // shared-memory collectives can reach it
  std::string local_host;  // not in process: the local address of the connection to it
  // The kind of device computing (its --devices prefix: "cpu", "vk"); a worker's, the kind its
  // device is (DeviceInfo), "" when an older worker does not say.
  std::string kind;
};

struct DeviceStats {
  std::array<double, static_cast<size_t>(parallel::LocalOp::Count)> op_seconds{};  // compute per op kind
  double collective_seconds = 0;  // inside collectives, waiting for peers included
  double step_seconds = 0;        // whole steps
  uint64_t steps = 0;
  // Remote devices only (0 elsewhere): the worker's time from a step's message to its reply, and
  // the coordinator's from sending the step to taking the reply. What they add to step_seconds is
  // the worker's own overhead and the link's (both ways, with the coordinator's wake-up).
  double served_seconds = 0;
  double round_trip_seconds = 0;
};

// What a device can hold its weights and caches in (zeros: it does not know).
struct DeviceMemory {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // what a load can still take
  // A load past free_bytes fails (a GPU's memory). False where it still runs, more slowly: a CPU
  // device reads the weights that do not fit from the file mapping.
  bool hard_limit = true;
  bool known() const { return total_bytes > 0; }
};

class Device {
 public:
  virtual ~Device() = default;

  // "cpu:0", "tcp://10.0.0.2:7070": used in every message about this device.
  virtual std::string name() const = 0;
  // Whether the device runs `op` with weights of type t (t ignored for ops without weights).
  virtual bool supports(parallel::LocalOp op, DType t) const = 0;
  // Threads the device computes with (for the planner's default ratios and for reports).
  virtual int threads() const = 0;
  virtual Reach reach() const = 0;
  // Joining the group of a tensor split, in two phases so that every rank connects at once (a
  // network mesh forms only when all have joined): begin_join returns at once, finish_join waits
  // until this device has joined. Without them a device runs alone.
  virtual void begin_join(GroupJoin join) = 0;
  virtual void finish_join() = 0;
  // Takes this device's graph, loads the weight slices it names from `weights` and allocates
  // activations and the KV cache. Called once, before any step.
  virtual void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) = 0;
  // Starts a step and returns at once; devices of one group run their steps concurrently.
  virtual void submit(Step step) = 0;
  // Waits up to timeout_ms for the submitted step: true when wait() will not block (also when no
  // step runs: then it returns at once). Throws weft::Error naming the device when it is known to
  // have failed (a worker gone silent, or its connection closed while idle), so a caller polling
  // several devices notices a dead one while others still run, and an idle one between steps.
  virtual bool poll(int timeout_ms) = 0;
  // Waits for the submitted step; rethrows its failure as weft::Error naming the device.
  virtual StepResult wait() = 0;
  // A peer failed: end this device's running step promptly (a collective waiting for the peer
  // fails instead of sitting out its timeout). Safe from another thread during a step; the device
  // is unusable afterwards.
  virtual void abort() = 0;
  virtual DeviceStats stats() const = 0;
  // What it can hold (load_devices refuses a plan past a hard limit); unknown unless a kind says.
  virtual DeviceMemory memory() const { return {}; }
  // What its group's all-reduces travel over (parallel::Group::transport), for logs; "" by default.
  virtual std::string_view group_transport() const { return ""; }
};

}  // namespace weft::device
