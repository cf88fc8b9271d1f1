#include "parallel/planner.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace weft::parallel {
namespace {

using graph::Axis;
using graph::Graph;
using graph::Node;
using graph::OpKind;
using graph::WeightTable;
using Kind = WeightSlice::Kind;

std::vector<double> normalise(const std::vector<double>& ratios) {
  if (ratios.empty() || static_cast<int>(ratios.size()) > kMaxDevices)
    fail("plan", "need 1..{} devices, got {}", kMaxDevices, ratios.size());
  double total = 0;
  for (double r : ratios) {
    if (!(r >= 0) || !std::isfinite(r)) fail("plan", "split ratio {} is not a finite number >= 0", r);
    total += r;
  }
  if (total <= 0) fail("plan", "split ratios sum to 0: at least one device must get work");
  std::vector<double> out;
  for (double r : ratios) out.push_back(r / total);
  return out;
}

const graph::WeightInfo& weight_info(const WeightTable& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) fail("plan", "graph reads tensor '{}' which the model does not have", name);
  return it->second;
}

// Makes ln compute graph node n whole, as on a lone device: full width, the whole weight and bias,
// every head (Rope and HeadNorm see q or k alone, so their heads are that input's).
void compute_whole(LocalNode& ln, const Node& n, const graph::Dims& d) {
  ln.width = n.width;
  if (!n.weight.empty()) ln.weight = {n.weight, Kind::Whole, {}};
  if (!n.bias.empty()) ln.bias = {n.bias, Kind::Whole, {}};
  ln.q_heads = {0, d.n_head};
  ln.kv_heads = {0, d.n_head_kv};
  if (n.op == OpKind::Rope || n.op == OpKind::HeadNorm) ln.q_heads = ln.kv_heads = {0, n.width / d.head_dim};
}

// Fills a finished device graph's weight bytes and KV values per token from its nodes.
void account(DeviceGraph& dg, const WeightTable& w) {
  for (const LocalNode& ln : dg.nodes) {
    for (const WeightSlice* s : {&ln.weight, &ln.bias})
      if (s->kind != Kind::None) dg.weight_bytes += slice_bytes(weight_info(w, s->tensor), *s);
    if (ln.op == LocalOp::Attention) dg.kv_values_per_token += 2 * ln.kv_heads.size() * dg.dims.head_dim;
  }
}

int64_t lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// Feature ranges of `axis` for each device, on multiples of unit features.
Partition cut(Axis axis, int64_t width, int64_t unit, const std::vector<double>& ratios) {
  Partition p{axis, unit, {}};
  for (Range r : proportional_ranges((width + unit - 1) / unit, ratios))
    p.ranges.push_back({std::min(r.begin * unit, width), std::min(r.end * unit, width)});
  return p;
}

// The block size along a matmul's input features, for the weight that consumes an axis split.
int64_t input_block(const Graph& g, const WeightTable& w, Axis axis) {
  int64_t blk = 1;
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::MatMul || n.inputs.empty() || g.nodes[n.inputs[0]].axis != axis) continue;
    blk = lcm(blk, block_size(weight_info(w, n.weight).type));
  }
  return blk;
}

std::vector<Partition> partitions(const Graph& g, const WeightTable& w, const std::vector<double>& ratios) {
  const auto& d = g.dims;
  const int n_active = static_cast<int>(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r > 0; }));
  // Heads: whole GQA groups while there are enough KV heads, so no KV head is computed twice;
  // otherwise single query heads, and devices share (replicate) the KV heads they need. Either
  // way a boundary must fall on a quant block of the attention output's input features.
  const int64_t base_heads = n_active <= d.n_head_kv ? d.group() : 1;
  int64_t heads_unit = base_heads;
  const int64_t blk = input_block(g, w, Axis::QHeads);
  while ((heads_unit * d.head_dim) % blk != 0 && heads_unit < d.n_head) heads_unit += base_heads;
  Partition q = cut(Axis::QHeads, d.n_head * d.head_dim, heads_unit * d.head_dim, ratios);
  Partition kv{Axis::KvHeads, d.head_dim, {}};
  for (const Range& r : q.ranges) {
    if (r.empty()) {
      kv.ranges.push_back({0, 0});
      continue;
    }
    const int64_t h0 = r.begin / d.head_dim, h1 = r.end / d.head_dim;
    kv.ranges.push_back({h0 / d.group() * d.head_dim, ((h1 - 1) / d.group() + 1) * d.head_dim});
  }
  Partition ffn = cut(Axis::Ffn, d.n_ff, input_block(g, w, Axis::Ffn), ratios);
  Partition vocab = cut(Axis::Vocab, d.n_vocab, 1, ratios);
  return {q, kv, ffn, vocab};
}

// Builds every device's local graph in lockstep, so collectives line up across devices.
class TensorPlanner {
 public:
  TensorPlanner(const Graph& g, const WeightTable& w, Plan& plan)
      : g_(g),
        w_(w),
        plan_(plan),
        n_(static_cast<int>(plan.ratios.size())),
        local_(n_, std::vector<int>(g.nodes.size(), -1)),
        cur_(g.nodes.size(), State::Replicated) {
    plan_.devices.resize(n_);
    for (int d = 0; d < n_; ++d) {
      plan_.devices[d].device = d;
      plan_.devices[d].dims = g.dims;
    }
  }

  void run() {
    for (int i = 0; i < static_cast<int>(g_.nodes.size()); ++i) visit(i);
    finish();
  }

 private:
  const Partition* part(Axis a) const { return n_ > 1 ? plan_.partition(a) : nullptr; }
  Range range(Axis a, int d) const {
    const Partition* p = part(a);
    return p ? p->ranges[d] : Range{0, g_.width_of(a)};
  }
  Range heads(Axis a, int d) const {
    Range r = range(a, d);
    return {r.begin / g_.dims.head_dim, r.end / g_.dims.head_dim};
  }

  // Appends one local node per device; fill(d, node) sets what differs per device.
  template <typename Fill>
  void emit(int source, LocalOp op, const std::vector<int>& inputs, Fill fill) {
    for (int d = 0; d < n_; ++d) {
      LocalNode ln{.op = op, .source = source};
      if (source >= 0) {
        ln.layer = g_.nodes[source].layer;
        ln.label = g_.nodes[source].label;
      }
      for (int in : inputs) ln.inputs.push_back(local_[d][in]);
      fill(d, ln);
      auto& nodes = plan_.devices[d].nodes;
      nodes.push_back(std::move(ln));
      if (source >= 0) local_[d][source] = static_cast<int>(nodes.size()) - 1;
    }
  }

  // Inserts a collective that makes node i's value replicated on every device: an all-reduce of a
  // partial sum, or an all-gather of a split value.
  void collective(int i, LocalOp op) {
    const Node& n = g_.nodes[i];
    emit(-1, op, {i}, [&](int, LocalNode& ln) {
      ln.width = n.width;
      ln.layer = n.layer;
      ln.label = std::string(local_op_name(op)) + "(" + n.label + ")";
      if (op == LocalOp::AllGather) ln.gather = part(n.axis)->ranges;
    });
    for (int d = 0; d < n_; ++d) local_[d][i] = static_cast<int>(plan_.devices[d].nodes.size()) - 1;
    plan_.collectives.push_back({.layer = n.layer, .op = op, .after = n.label, .values_per_token = n.width});
    cur_[i] = State::Replicated;
  }

  void make_replicated(int i) {
    if (cur_[i] == State::Partial) collective(i, LocalOp::AllReduce);
    if (cur_[i] == State::Split) collective(i, LocalOp::AllGather);
  }

  // An op with no split rule for these inputs: gather them and compute it whole on every device.
  void fallback(int i, const char* why) {
    const Node& n = g_.nodes[i];
    if (n_ > 1)
      plan_.fallbacks.push_back(fmt::format("{} (layer {}): {}; gathered and replicated", n.label, n.layer, why));
    replicate(i);
  }

  // Computes node i whole on every device, from replicated inputs.
  void replicate(int i) {
    const Node& n = g_.nodes[i];
    for (int in : n.inputs) make_replicated(in);
    emit(i, local_op(n.op), n.inputs, [&](int, LocalNode& ln) { compute_whole(ln, n, g_.dims); });
    cur_[i] = State::Replicated;
  }

  void visit(int i) {
    const Node& n = g_.nodes[i];
    auto in_state = [&](int k) { return cur_[n.inputs[k]]; };
    auto in_axis = [&](int k) { return g_.nodes[n.inputs[k]].axis; };
    switch (n.op) {
      case OpKind::Embed:
      case OpKind::RmsNorm:  // needs the whole row: the residual stream is kept replicated
        return replicate(i);
      case OpKind::MatMul: {
        const int in = n.inputs[0];
        if (in_state(0) == State::Partial) collective(in, LocalOp::AllReduce);
        if (cur_[in] == State::Replicated && part(n.axis)) {  // column-parallel
          emit(i, LocalOp::MatMul, n.inputs, [&](int d, LocalNode& ln) {
            ln.width = range(n.axis, d).size();
            ln.weight = {n.weight, Kind::Rows, range(n.axis, d)};
            if (!n.bias.empty()) ln.bias = {n.bias, Kind::Rows, range(n.axis, d)};
          });
          cur_[i] = State::Split;
          return;
        }
        if (cur_[in] == State::Split && in_axis(0) != Axis::KvHeads) {  // row-parallel
          emit(i, LocalOp::MatMul, n.inputs, [&](int d, LocalNode& ln) {
            ln.width = n.width;
            ln.weight = {n.weight, Kind::Cols, range(in_axis(0), d)};
            // The bias is added once, by device 0, so that the partial sums add up to it.
            if (!n.bias.empty() && d == 0) ln.bias = {n.bias, Kind::Whole, {}};
          });
          cur_[i] = State::Partial;
          return;
        }
        return fallback(i, "matmul output axis is not split");
      }
      case OpKind::HeadNorm:
      case OpKind::Rope: {
        if (in_state(0) != State::Split) return fallback(i, "input is not split");
        emit(i, local_op(n.op), n.inputs, [&](int d, LocalNode& ln) {
          ln.width = range(n.axis, d).size();
          if (!n.weight.empty()) ln.weight = {n.weight, Kind::Whole, {}};
          ln.q_heads = ln.kv_heads = heads(n.axis, d);
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::Attention: {
        const bool by_heads = in_state(0) == State::Split && in_state(1) == State::Split &&
                              in_state(2) == State::Split && in_axis(0) == Axis::QHeads &&
                              in_axis(1) == Axis::KvHeads && in_axis(2) == Axis::KvHeads;
        if (!by_heads) return fallback(i, "q/k/v are not split by heads");
        emit(i, LocalOp::Attention, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = range(Axis::QHeads, d).size();
          ln.q_heads = heads(Axis::QHeads, d);
          ln.kv_heads = heads(Axis::KvHeads, d);
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::SwiGlu:
      case OpKind::Add: {
        // A partial addend is completed first: the residual stream stays replicated (Megatron).
        for (int k = 0; k < 2; ++k)
          if (in_state(k) == State::Partial) collective(n.inputs[k], LocalOp::AllReduce);
        const bool both_split = in_state(0) == State::Split && in_state(1) == State::Split && in_axis(0) == in_axis(1);
        if (both_split) {
          emit(i, local_op(n.op), n.inputs, [&](int d, LocalNode& ln) { ln.width = range(in_axis(0), d).size(); });
          cur_[i] = State::Split;
          return;
        }
        if (in_state(0) == State::Replicated && in_state(1) == State::Replicated) return replicate(i);
        return fallback(i, "inputs split differently");
      }
      case OpKind::Count: break;
    }
    fail("plan", "node {} has an unknown op", i);
  }

  void finish() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) plan_.states.push_back(cur_[i]);
    const Node& out = g_.nodes[g_.output];
    const bool split_logits = cur_[g_.output] == State::Split;
    for (int d = 0; d < n_; ++d) {
      DeviceGraph& dg = plan_.devices[d];
      dg.output = local_[d][g_.output];
      dg.vocab = split_logits ? range(Axis::Vocab, d) : Range{0, out.width};
      // Replicated logits are sampled once, by device 0.
      dg.has_logits = split_logits ? !dg.vocab.empty() : d == 0;
      if (!dg.has_logits) dg.vocab = {};
      account(dg, w_);
    }
  }

  const Graph& g_;
  const WeightTable& w_;
  Plan& plan_;
  int n_;
  std::vector<std::vector<int>> local_;  // [device][graph node] -> local node holding its current value
  std::vector<State> cur_;               // current state of each graph node's value
};

// Checks each matmul's weight against the graph before any slicing relies on it.
void check_weights(const Graph& g, const WeightTable& w) {
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::MatMul) continue;
    const auto& wi = weight_info(w, n.weight);
    const int64_t in = g.nodes[n.inputs[0]].width;
    if (wi.cols != in || wi.rows != n.width)
      fail("plan", "tensor '{}' is {}x{}, the graph needs {}x{}", n.weight, wi.cols, wi.rows, in, n.width);
  }
}

}  // namespace

std::vector<Range> proportional_ranges(int64_t n_units, const std::vector<double>& ratios) {
  const auto r = normalise(ratios);
  std::vector<Range> out;
  double cum = 0;
  int64_t begin = 0;
  for (size_t d = 0; d < r.size(); ++d) {
    cum += r[d];
    int64_t end = d + 1 == r.size() ? n_units : std::llround(cum * static_cast<double>(n_units));
    end = std::clamp<int64_t>(end, begin, n_units);
    out.push_back({begin, end});
    begin = end;
  }
  return out;
}

Plan plan_tensor(const Graph& g, const WeightTable& weights, const std::vector<double>& ratios) {
  check_weights(g, weights);
  Plan plan;
  plan.mode = ratios.size() > 1 ? SplitMode::Tensor : SplitMode::None;
  plan.ratios = normalise(ratios);
  plan.partitions = partitions(g, weights, plan.ratios);
  TensorPlanner(g, weights, plan).run();
  return plan;
}

Plan plan_layers(const Graph& g, const WeightTable& weights, const std::vector<double>& ratios) {
  check_weights(g, weights);
  Plan plan;
  plan.mode = SplitMode::Layer;
  plan.ratios = normalise(ratios);
  plan.layers = proportional_ranges(g.dims.n_layer, plan.ratios);
  const int n = static_cast<int>(plan.ratios.size());
  const int n_nodes = static_cast<int>(g.nodes.size());
  plan.states.assign(n_nodes, State::Replicated);
  plan.devices.resize(n);
  // Nodes before the first block (embedding) go to device 0, those after the last (output norm,
  // logits) to the last device; the blocks in between follow plan.layers.
  auto owner = [&](const Node& node, int idx) {
    if (node.layer >= 0) {
      for (int d = 0; d < n; ++d)
        if (node.layer >= plan.layers[d].begin && node.layer < plan.layers[d].end) return d;
    }
    const bool block_follows =
        std::any_of(g.nodes.begin() + idx, g.nodes.end(), [](const Node& x) { return x.layer >= 0; });
    return block_follows ? 0 : n - 1;
  };
  for (int d = 0; d < n; ++d) {
    DeviceGraph& dg = plan.devices[d];
    dg.device = d;
    dg.dims = g.dims;
    std::vector<int> local(n_nodes, -1);
    int residual = -1;  // graph node carrying the residual stream into this device
    if (d > 0) {
      dg.nodes.push_back(LocalNode{.op = LocalOp::Input, .width = g.dims.n_embd, .label = "input"});
    }
    for (int i = 0; i < n_nodes; ++i) {
      const Node& node = g.nodes[i];
      if (owner(node, i) != d) continue;
      LocalNode ln{.op = local_op(node.op), .source = i, .layer = node.layer, .label = node.label};
      for (int in : node.inputs) {
        if (local[in] < 0) {  // produced on an earlier device: it is the residual stream handed over
          WEFT_ASSERT(d > 0 && g.nodes[in].axis == graph::Axis::Embd && (residual < 0 || residual == in));
          residual = in;
          ln.inputs.push_back(0);
        } else {
          ln.inputs.push_back(local[in]);
        }
      }
      compute_whole(ln, node, g.dims);
      dg.nodes.push_back(std::move(ln));
      local[i] = static_cast<int>(dg.nodes.size()) - 1;
    }
    dg.has_logits = d == n - 1;
    dg.passes_residual = !dg.has_logits;
    dg.output = static_cast<int>(dg.nodes.size()) - 1;
    if (dg.has_logits) dg.vocab = {0, g.dims.n_vocab};
    account(dg, weights);
  }
  return plan;
}

Plan make_plan(SplitMode mode, const Graph& g, const WeightTable& weights, const std::vector<double>& ratios) {
  switch (mode) {
    case SplitMode::None: return plan_tensor(g, weights, {1.0});
    case SplitMode::Tensor: return plan_tensor(g, weights, ratios);
    case SplitMode::Layer: return plan_layers(g, weights, ratios);
  }
  fail("plan", "unknown split mode");
}

}  // namespace weft::parallel
