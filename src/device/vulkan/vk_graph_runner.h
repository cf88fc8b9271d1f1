// Executes one device's graph on a Vulkan device: weight slices uploaded once at load into device
// memory, activations and KV caches there too; each step recorded into one command buffer per
// stretch between collectives, each queued as soon as it is recorded (an all-reduce goes through
// host-visible staging memory into the group's host collective while the GPU holds what follows).
// Embedding rows are looked up on the host, as llama.cpp keeps the token embedding off the GPU.
// Lives on the device thread.
#pragma once

#include "device/cpu/cpu_weights.h"
#include "device/device.h"
#include "device/kv_windows.h"
#include "device/step_layout.h"
#include "device/vulkan/vk_gpu.h"

#include <memory>
#include <optional>
#include <vector>

namespace weft::device::vk {

// Whether the Vulkan kernels run `op` with weights of type t.
bool vk_supports(parallel::LocalOp op, DType t);

class VkGraphRunner {
 public:
  VkGraphRunner(Gpu& gpu, parallel::Group* group);
  ~VkGraphRunner();
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt);
  StepResult run(const Step& step);
  const DeviceStats& stats() const { return stats_; }

 private:
  // A matrix in device memory: buffers of whole rows (dense) or whole experts, each no larger
  // than the largest buffer a shader may read.
  struct WeightPart {
    Buffer buf;
    int64_t first = 0, count = 0;  // rows (dense) or experts held in this buffer
  };
  struct Matrix {
    DType type = DType::F32;
    int64_t rows = 0, cols = 0;  // rows: of the whole slice (dense) or of one expert
    int64_t expert_first = 0;    // global id of the first expert held (experts)
    std::vector<WeightPart> parts;
  };
  struct NodeState {
    Matrix w;
    kernels::WeightMatrix embed;  // Embed: rows read on the host
    Buffer vec;                   // norm weight; Attention: its q heads' sinks (or none)
    Buffer bias;                  // MatMul bias; Expert*: the held experts' biases, [n][rows] (or none)
    Buffer k_cache, v_cache;
    int64_t kv_rows = 0;      // Attention: rows per slot and kv head (n_ctx, or a sliding window's)
    bool windowed = false;    // Attention: a sliding-window layer keeping kv_rows < n_ctx
    int kv_node = -1;         // Attention: the node whose caches it reads (itself, or an earlier layer's)
    int64_t staged = 0;       // Embed, Input: its rows' first float in the step input's staging buffer
    int64_t head_width = 0;   // HeadNorm: the features its weight covers
    Buffer state;             // CausalConv, DeltaNet: every state slot's recurrent state
    int64_t state_bytes = 0;  // of one state slot
    int buffer = -1;
  };
  struct Ctx {
    const Step& step;
    const StepLayout& l;
    int64_t n_tokens;
  };
  VkBuffer out(int node) const { return buffers_[nodes_[node].buffer].buffer; }
  Matrix upload_matrix(const kernels::WeightMatrix& m, int64_t n_experts, int64_t expert_first,
                       const std::string& what);
  Buffer upload_floats(const std::vector<float>& v, const char* what);
  void upload(Buffer& dst, uint64_t offset, const uint8_t* src, uint64_t n);
  void exec(int i, const Ctx& c);
  void record_rms(VkBuffer x, VkBuffer w, VkBuffer y, uint32_t n, uint32_t rows, float eps);
  void record_elementwise(VkBuffer a, VkBuffer b, VkBuffer y, uint32_t n, uint32_t width, uint32_t op);
  // y = W x over x's `rows` rows of w.cols values (quantized first where the type reads integers);
  // mode as matmul.comp; experts (modes 1, 2) add `bias` [experts held][w.rows] unless it is null;
  // `terms`: the routes' slots a row (the model's experts used where 0).
  void record_matmul(const Matrix& w, VkBuffer x, int64_t x_rows, VkBuffer y, int64_t y_stride, uint32_t mode,
                     int64_t n_tokens, VkBuffer routes, VkBuffer bias = VK_NULL_HANDLE, int64_t terms = 0);
  void record_attention(int i, const Ctx& c);
  void record_linear_attention(int i, const Ctx& c);  // Gated DeltaNet's CausalConv and DeltaNet
  void record_head_matmul(int i, const Ctx& c);       // DeepSeek's per-head matrices
  void record_latent_attention(int i, const Ctx& c);
  void move_windows(const NodeState& ns, int64_t n_kv, int64_t hd, const Ctx& c);
  void copy_states(const Step& step);
  void collective(int i, const Ctx& c);
  void combine_pending();
  void logits(const Ctx& c);
  std::pair<uint32_t, uint32_t> grid(uint64_t groups) const;  // groups as x * y within the device's limits

  Gpu& gpu_;
  parallel::Group* group_;
  std::unique_ptr<WeightStore> host_weights_;  // the embedding, read in place from the mapping
  parallel::DeviceGraph graph_;
  LoadOptions opt_;
  std::vector<NodeState> nodes_;
  std::vector<Buffer> buffers_;
  Buffer upload_, tok_, rope_, input_;  // host-visible: staging for loads, per-step inputs
  Buffer rope_swa_;                     // sliding-window layers' angles (their own RoPE base)
  Buffer gelu_table_;                   // kernels::gelu_f16_table() as floats, where GeGlu runs
  Buffer kv_base_;                      // per slot: the step's sliding-window base (windows_)
  Buffer seqs_;                         // per step sequence: its first token, tokens, slot, whether it starts over
  Buffer mla_rows_, mla_out_;           // latent attention's cache rows and queries, its outputs; head matmuls' inputs
  bool recurrent_ = false;              // the graph holds Gated DeltaNet's state per slot
  KvWindows windows_;
  std::vector<int64_t> next_base_;
  Buffer act_q_, act_d_, act_s_;  // activations quantized for the integer dot products
  struct Quantized {              // what they hold: a node buffer's values in a format (record_matmul)
    VkBuffer x = VK_NULL_HANDLE;
    int act = -1;
    int64_t values = 0;
    bool operator==(const Quantized&) const = default;
  };
  Quantized quantized_;
  Buffer staging_;  // collectives' host-visible memory
  Buffer logits_in_, logits_, readback_;
  int64_t logits_rows_ = 0;  // rows of logits one pass computes
  Buffer dummy_;             // bound where a shader's binding is unused
  bool int_dot_ = false;     // the legacy types' matmuls take the integer dot product (matmul_*_dot)
  std::vector<float> gather_tmp_;
  struct Pending {  // a collective handed to the host, its value not yet combined
    int node = -1;
    uint64_t ready = 0;  // Gpu::hand_off's value
    int64_t n_tokens = 0;
  };
  std::optional<Pending> pending_;
  std::vector<int32_t> n_cached_;
  KeptLogits kept_;  // for a Step::reread
  DeviceStats stats_;
};

}  // namespace weft::device::vk
