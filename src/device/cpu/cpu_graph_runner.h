// Executes one device's graph on the CPU: buffers planned once at load, weights resolved once,
// a KV cache per attention node. Lives on the device thread.
#pragma once

#include "core/huge_buffer.h"
#include "core/thread_pool.h"
#include "device/cpu/collective_thread.h"
#include "device/cpu/cpu_weights.h"
#include "device/device.h"
#include "device/kv_windows.h"
#include "device/step_layout.h"
#include "kernels/linear_attention.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"

#include <memory>
#include <vector>

namespace weft::device {

class CpuGraphRunner {
 public:
  CpuGraphRunner(int n_threads, const Placement& placement, bool spin, bool map_weights, bool repack_mapped,
                 parallel::Group* group);
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt);
  StepResult run(const Step& step);
  const DeviceStats& stats() const { return stats_; }

 private:
  struct NodeState {
    kernels::WeightMatrix w;  // MatMul, Embed
    std::vector<float> vec;   // RmsNorm / HeadNorm weight; Attention: its q heads' sinks (or none)
    std::vector<float>
        bias;         // MatMul bias slice; Expert*: the held experts' biases, [n][rows]; MoeRoute: selection bias
    int buffer = -1;  // index into buffers_
    // Attention: [n_seq, n_ctx, kv_heads, head_dim] of opt_.k_type / v_type; a decode step reads
    // rows of one head 1 KiB or more apart, a TLB miss every few rows on 4 KiB pages.
    HugeBuffer k_cache, v_cache;
    int64_t kv_rows = 0;           // Attention: rows per slot and kv head (n_ctx, or a sliding window's)
    bool windowed = false;         // Attention: a sliding-window layer keeping kv_rows < n_ctx
    std::vector<int32_t> kv_of_q;  // Attention: local kv head of each local q head
    // Attention: the local q heads of each local kv head, [begin, end), the pool's work items
    std::vector<std::pair<int64_t, int64_t>> head_runs;
    int kv_node = -1;              // Attention: the node whose caches it reads (itself, or an earlier layer's)
    kernels::ExpertStack experts;  // Expert*: the experts held (none: n == 0); HeadMatMul: the heads'
    // CausalConv, DeltaNet: each slot's recurrent state, state_floats a slot (the last inputs, a
    // row a position; a matrix per value head), as its sequence's last step left it.
    std::vector<float> state;
    int64_t state_floats = 0;
  };
  float* out(int node) { return buffers_[nodes_[node].buffer].data(); }
  void plan_buffers(int32_t max_tokens);
  void populate_kv_caches();
  const kernels::WeightMatrix* fusable_matmul(int node, int64_t n_tokens) const;
  // What every node of one step reads besides its inputs.
  struct StepCtx {
    const Step& step;
    int64_t n_tokens;
    const std::vector<int32_t>& pos;        // position of each token in its sequence
    const std::vector<int64_t>& kv_row;     // its row in the KV caches: slot * n_ctx + position
    const std::vector<int64_t>& out_rows;   // tokens whose logits are wanted: each wanting sequence's last
    const std::vector<int64_t>& seq_first;  // each sequence's first token in the step
  };
  void exec(int i, const StepCtx& c);
  // Node i's output, row by row; when its only readers are matmuls, each row is converted for
  // them as it is made (see fusable_matmul).
  void produce_rows(int i, const StepCtx& c, const kernels::RowProducer& row);
  void embed(int i, const StepCtx& c);
  void matmul(int i, const StepCtx& c);
  // Row-parallel matmul straight into an all-reduce over a network, on a prompt: see matmul.
  bool overlaps_all_reduce(int i, const StepCtx& c) const;
  void matmul_rows(int i, const float* x, int64_t k, int64_t rows, float* y, bool prepare);
  void prepare_input(int i, const float* x, int64_t k, int64_t rows, bool rows_of_x);
  // --exact: whether node i sums in fixed point (a matmul over a split axis' features), and that
  // product, into fixed_[i]. A partial sum stays in fixed point through a shared expert's gate and
  // the add of the experts' to the all-reduce that reads it; a float reader gets it converted.
  bool sums_fixed(int i) const;
  void mark_fixed_values();
  void matmul_fixed(int i, const float* x, int64_t k, int64_t rows);
  const float* gate_scale(int i, int64_t rows);
  std::vector<int64_t>& new_fixed(int i, int64_t n);
  void finish_fixed(int i, int64_t n);
  void release_fixed(int i);
  void carry_fixed(int i, const StepCtx& c);
  void all_reduce_fixed(int i, int64_t n);
  static constexpr int64_t kOverlapTokens = 32;  // a chunk: 256 KiB of partial sums at n_embd 2048
  void attention(int i, const StepCtx& c);
  void head_matmul(int i, const StepCtx& c);
  void latent_attention(int i, const StepCtx& c);
  void move_windows(NodeState& ns, int64_t n_kv, int64_t hd, const StepCtx& c);
  void all_gather(int i, const StepCtx& c);
  void expert_op(int i, const StepCtx& c);
  void causal_conv(int i, const StepCtx& c);
  void delta_net(int i, const StepCtx& c);
  // The slot's recurrent state in node i, zeroed where its sequence starts over.
  float* slot_state(int i, const StepSeq& q);

  ThreadPool pool_;
  parallel::Group* group_;
  WeightStore store_;
  parallel::DeviceGraph graph_;
  std::vector<NodeState> nodes_;
  std::vector<std::vector<float>> buffers_;
  kernels::MatmulScratch scratch_;
  kernels::MoeScratch moe_scratch_;
  // What scratch_ holds: node `node`'s output of step `step`, converted to `layout`. A node's buffer
  // is not reused before its last reader has run, so every matmul reading it until then may use them.
  struct HeldActivations {
    int node = -1;
    uint64_t step = 0;
    int layout = -1;
    bool operator==(const HeldActivations&) const = default;
  } held_;
  uint64_t step_id_ = 0;
  std::vector<std::vector<int>> readers_;  // nodes reading each node's output
  std::vector<float> gather_tmp_;
  std::vector<char> fixed_value_;                  // per node: its value is a partial sum in fixed point
  std::vector<std::vector<int64_t>> fixed_;        // per node: those sums this step (empty once read)
  std::vector<std::vector<int64_t>> spare_fixed_;  // buffers read, for the next sums
  std::vector<float> gate_;                        // gate_scale's sigmoids
  std::vector<float> logit_rows_;                  // the output node's input rows of out_rows, side by side
  std::vector<float> mla_rows_, mla_q_, mla_out_;  // LatentAttention: cache rows, queries, outputs of a step
  std::vector<float> delta_qk_;                    // DeltaNet: the step's q and k, L2-normed
  std::vector<kernels::DeltaGates> delta_gates_;   // DeltaNet: the step's gates per value head
  std::vector<float*> delta_states_;               // DeltaNet: each sequence's state in its slot
  bool recurrent_ = false;                         // the graph holds recurrent state (CausalConv, DeltaNet)
  std::unique_ptr<CollectiveThread> collectives_;  // created on the first overlapped all-reduce
  LoadOptions opt_;
  std::vector<int32_t> n_cached_;   // per slot: positions [0, n_cached_) hold valid K/V
  KeptLogits kept_;                 // for a Step::reread
  KvWindows windows_;               // per slot: where the sliding-window layers' caches start
  std::vector<int64_t> next_base_;  // ... once this step has run (the caches move there first)
  DeviceStats stats_;
};

}  // namespace weft::device
