// The split plan: what the planner (planner.h) produces and every device kind consumes.
// A plan is plain data: per-device graphs, the weight slices each node reads, and the collectives
// between devices. It holds no weights, threads or sockets, so it can be printed, tested and sent.
#pragma once

#include "graph/graph.h"
#include "parallel/wire_type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::parallel {

inline constexpr int kMaxDevices = 16;

enum class SplitMode : uint8_t { None, Layer, Tensor };
std::string_view split_mode_name(SplitMode m);

// How a tensor split cuts the experts of a mixture-of-experts layer (--moe-split).
enum class MoeSplit : uint8_t {
  Auto,    // the planner chooses (plan_tensor says which and why)
  Tensor,  // every expert's gate/up by rows and down by columns, like a dense FFN
  Expert,  // whole experts per device, in proportion to the ratios
};
std::string_view moe_split_name(MoeSplit m);

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range&) const = default;
};

// Where a value lives across devices after the op that produced it.
enum class State : uint8_t {
  Replicated,  // every device holds all of it
  Split,       // device d holds the features partition(axis).ranges[d]
  Partial,     // every device holds a full-width addend; the value is their sum
};
std::string_view state_name(State s);

// How one axis is cut: ranges of features per device, on multiples of `unit` features.
// KvHeads ranges may overlap when there are more devices than KV heads (replicated KV heads).
struct Partition {
  graph::Axis axis = graph::Axis::Embd;
  int64_t unit = 1;
  std::vector<Range> ranges;  // one per device, in features
};

// The runs a Rows / Cols slice takes: `range`, and again every `stride`, `repeats` times in all.
inline std::vector<Range> slice_runs(Range range, int64_t stride, int64_t repeats) {
  std::vector<Range> out;
  for (int64_t r = 0; r < repeats; ++r) out.push_back({range.begin + r * stride, range.end + r * stride});
  return out;
}

// The part of a GGUF tensor a node reads. Rows = ggml ne1 (outputs), cols = ne0 (inputs); of a vector
// (one row: a bias, sinks), Rows takes elements.
// A stacked tensor (experts, ggml ne2) is cut the same way in each of the matrices `experts` names.
struct WeightSlice {
  enum class Kind : uint8_t { None, Whole, Rows, Cols };
  std::string tensor;
  Kind kind = Kind::None;
  Range range;    // rows or cols taken, for Rows / Cols (of each matrix)
  Range experts;  // the stacked matrices taken; empty: all of them (a 2-D tensor: its one)
  // Rows / Cols: `range` taken again `stride` further on, `repeats` times in all, one run after
  // another (Gated DeltaNet's value heads of some key heads, a run in each block of key heads).
  int64_t stride = 0, repeats = 1;
  int64_t taken() const { return range.size() * repeats; }  // rows or cols in all
  std::vector<Range> runs() const { return slice_runs(range, stride, repeats); }
};

// What a device runs: every graph op (same names and numbers as graph::OpKind, so that a profile
// indexed by LocalOp reads as graph ops; plan.cpp's static_asserts keep the two in step), then
// the ops only a split adds.
enum class LocalOp : uint8_t {
  Embed,
  RmsNorm,
  MatMul,
  HeadNorm,
  Rope,
  Attention,
  SwiGlu,
  Add,
  MoeRoute,
  ExpertMatMul,
  ExpertMatMulSum,
  SigmoidScale,
  GeGlu,
  SwiGluOai,
  Scale,
  Slice,
  HeadMatMul,
  LatentAttention,
  CausalConv,
  DeltaNet,   // graph::OpKind
  Input,      // layer split: the residual stream handed over by the previous device
  AllReduce,  // sum of the Partial value over the group, in place
  AllGather,  // Split value -> Replicated
  Count
};
std::string_view local_op_name(LocalOp op);

// The local op that computes a graph op. A switch without default, so -Wswitch names an OpKind
// added without its LocalOp.
constexpr LocalOp local_op(graph::OpKind op) {
  switch (op) {
    case graph::OpKind::Embed: return LocalOp::Embed;
    case graph::OpKind::RmsNorm: return LocalOp::RmsNorm;
    case graph::OpKind::MatMul: return LocalOp::MatMul;
    case graph::OpKind::HeadNorm: return LocalOp::HeadNorm;
    case graph::OpKind::Rope: return LocalOp::Rope;
    case graph::OpKind::Attention: return LocalOp::Attention;
    case graph::OpKind::SwiGlu: return LocalOp::SwiGlu;
    case graph::OpKind::Add: return LocalOp::Add;
    case graph::OpKind::MoeRoute: return LocalOp::MoeRoute;
    case graph::OpKind::ExpertMatMul: return LocalOp::ExpertMatMul;
    case graph::OpKind::ExpertMatMulSum: return LocalOp::ExpertMatMulSum;
    case graph::OpKind::SigmoidScale: return LocalOp::SigmoidScale;
    case graph::OpKind::GeGlu: return LocalOp::GeGlu;
    case graph::OpKind::SwiGluOai: return LocalOp::SwiGluOai;
    case graph::OpKind::Scale: return LocalOp::Scale;
    case graph::OpKind::Slice: return LocalOp::Slice;
    case graph::OpKind::HeadMatMul: return LocalOp::HeadMatMul;
    case graph::OpKind::LatentAttention: return LocalOp::LatentAttention;
    case graph::OpKind::CausalConv: return LocalOp::CausalConv;
    case graph::OpKind::DeltaNet: return LocalOp::DeltaNet;
    case graph::OpKind::Count: break;
  }
  return LocalOp::Count;
}

struct LocalNode {
  LocalOp op;
  int source = -1;          // graph node it computes (-1 for collectives and Input)
  std::vector<int> inputs;  // ids of earlier local nodes
  int64_t width = 0;        // features per token this device holds
  WeightSlice weight, bias;
  int layer = -1;
  std::string label;
  Range q_heads, kv_heads;    // Attention, Rope, HeadNorm, HeadMatMul: global head indices held here
  Range experts;              // Expert*: global ids of the experts whose matrices the weight holds
  std::vector<Range> gather;  // AllGather: every device's feature range, in rank order
  // MatMul over the features of a split axis (attention output, FFN down) and ExpertMatMulSum
  // (an expert's down), in every split mode: the reduction's granule in input features. Any split
  // of that axis falls on granule boundaries, so a run in fixed point (--exact: each granule's
  // partial an integer) gets the same sums however the axis is cut. 0: a matmul no split reduces.
  int64_t granule = 0;
  float factor = 1.f;  // Scale without a weight: the constant; Embed: its rows' scale (graph::Node::factor)
  // Slice: its input's first feature copied; Rope: each head's first rotated feature (graph::Node::row0)
  int64_t offset = 0;
};

struct DeviceGraph {
  int device = 0;
  graph::Dims dims;
  std::vector<LocalNode> nodes;
  int output = -1;  // logits slice (tensor split, or last device of a layer split), or residual
  Range vocab;      // vocabulary ids covered by this device's logits (empty if none)
  bool has_logits = false;
  // Layer split, every device but the last: the output is the residual stream [n_tokens, n_embd]
  // handed to the next device. Otherwise a device without logits returns nothing.
  bool passes_residual = false;
  uint64_t weight_bytes = 0;
  // Weights one decoded token reads: every dense slice, and of each expert slice the share of its
  // experts a token selects on average (n_expert_used / n_expert of the whole stack).
  uint64_t decode_bytes = 0;
  uint64_t kv_values_per_token = 0;  // K and V values over this device's layers and heads
  uint64_t kv_window_values = 0;     // of which in sliding-window layers (kept for their window only)
  // Recurrent state values per sequence slot, whatever its length (Gated DeltaNet's convolution
  // inputs and matrices, f32).
  uint64_t state_values_per_slot = 0;
};

struct CollectiveInfo {
  int layer = -1;
  LocalOp op = LocalOp::AllReduce;
  std::string after;             // label of the node whose value it combines
  int64_t values_per_token = 0;  // elements per rank (the value's full width)
  // Payload per rank for one token; the wire type is the run's (--wire), not the plan's.
  uint64_t bytes_per_token(WireType wire) const { return values_per_token * wire_type_bytes(wire); }
};

struct Plan {
  SplitMode mode = SplitMode::None;
  std::vector<double> ratios;  // normalised, one per device
  std::vector<State> states;   // per graph node, as produced by its op
  std::vector<Partition> partitions;
  std::vector<DeviceGraph> devices;
  std::vector<CollectiveInfo> collectives;
  std::vector<std::string> fallbacks;  // ops without a split rule, run gathered + replicated
  std::vector<Range> layers;           // layer split: layers of each device
  // Mixture of experts under a tensor split: the split chosen (never Auto), why, and in expert
  // split the experts each device holds.
  MoeSplit moe_split = MoeSplit::Tensor;
  std::string moe_reason;
  std::vector<Range> experts;
  // plan_within_memory (memory_fit.h): the ratios asked for (normalised) when it lowered some
  // device's share to fit its memory; empty when it did not.
  std::vector<double> asked_ratios;

  const Partition* partition(graph::Axis a) const;
  // Whether device d's share was lowered to fit its memory.
  bool memory_capped(size_t d) const { return d < asked_ratios.size() && ratios[d] < asked_ratios[d]; }
  int collectives_in_layer(int layer) const;
};

uint64_t slice_bytes(const graph::WeightInfo& w, const WeightSlice& s);

}  // namespace weft::parallel
