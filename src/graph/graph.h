// The op graph a model builds: one token step of a decoder, activations [n_tokens, width] f32.
// The graph names no devices. The split planner (src/parallel) cuts it across devices by reading each
// activation's Axis — what its features mean — never tensor names.
#pragma once

#include "core/dtype.h"
#include "core/rope_params.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace weft::graph {

// Meaning of an activation's feature axis.
enum class Axis : uint8_t {
  Embd,     // the residual stream: never split (every device needs all of it for RMSNorm)
  QHeads,   // n_head * head_dim: query heads, and attention output
  KvHeads,  // n_head_kv * head_dim: keys and values
  Ffn,      // n_ff: the MLP's hidden width
  Vocab,    // logits
  Count
};
std::string_view axis_name(Axis a);

enum class OpKind : uint8_t {
  Embed,      // token ids -> rows of `weight`                          out Embd
  RmsNorm,    // x -> x / rms(x) * weight                                 same axis
  MatMul,     // x[in] -> W x (+ bias); W is [width rows, in cols]
  HeadNorm,   // per-head RMSNorm with weight [head_dim] (qwen3 q/k norm)
  Rope,       // rotate each head by its token's position
  Attention,  // inputs q, k, v: causal attention over this layer's KV cache
  SwiGlu,     // inputs gate, up: silu(gate) * up
  Add,        // inputs a, b: a + b (the residual stream)
  Count
};
std::string_view op_name(OpKind op);

struct Node {
  OpKind op;
  std::vector<int> inputs;  // ids of earlier nodes (topological order); Embed has none
  Axis axis;                // meaning of this node's output features
  int64_t width = 0;        // features per token of the output
  std::string weight;       // tensor read by Embed, RmsNorm, MatMul, HeadNorm; else empty
  std::string bias;         // MatMul only, optional
  int layer = -1;           // block index; -1 outside the blocks
  std::string label;        // for plans and profiles: "attn_q", "ffn_down"
};

// Shape facts the ops and the planner need beyond single nodes.
struct Dims {
  int64_t n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0, n_layer = 0;
  float norm_eps = 1e-5f;
  RopeParams rope;
  int64_t group() const { return n_head / n_head_kv; }  // q heads per kv head (GQA)
};

struct Graph {
  Dims dims;
  std::vector<Node> nodes;
  int output = -1;  // the logits node (Axis::Vocab)

  int add(Node n);                 // appends, checks inputs precede it, returns the id
  int64_t width_of(Axis a) const;  // full width of an axis
};

// Weight facts the planner needs (type for block alignment, shape to check the graph against).
struct WeightInfo {
  DType type = DType::F32;
  int64_t cols = 0, rows = 0;  // ggml ne0, ne1
};

// Facts about each weight tensor a graph reads, by tensor name: the planner's second input, which a
// model fills from its file (model::weight_table).
using WeightTable = std::map<std::string, WeightInfo>;

}  // namespace weft::graph
