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
  double top = 0;
  for (double r : ratios) {
    if (!(r >= 0) || !std::isfinite(r)) fail("plan", "split ratio {} is not a finite number >= 0", r);
    top = std::max(top, r);
  }
  if (top <= 0) fail("plan", "split ratios sum to 0: at least one device must get work");
  // Ratios are relative: where their sum overflows (1e308 + 1e308), they are scaled by the largest.
  double scale = 1, total = std::accumulate(ratios.begin(), ratios.end(), 0.0);
  if (!std::isfinite(total)) {
    scale = top;
    total = 0;
    for (double r : ratios) total += r / scale;
  }
  std::vector<double> out;
  for (double r : ratios) out.push_back(r / scale / total);
  return out;
}

const graph::WeightInfo& weight_info(const WeightTable& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) fail("plan", "graph reads tensor '{}' which the model does not have", name);
  return it->second;
}

bool is_expert_op(OpKind op) { return op == OpKind::ExpertMatMul || op == OpKind::ExpertMatMulSum; }
bool is_expert_op(LocalOp op) { return op == LocalOp::ExpertMatMul || op == LocalOp::ExpertMatMulSum; }

// Axes every device holds whole, by rule rather than as a fallback: the router's logits and the
// routes (every device needs all of them to pick the top k), the shared expert's gate logit, the
// per-layer inputs with their gates, and MLA's latents (a few hundred values a token: computing them
// whole costs less than a collective).
bool kept_whole(Axis a) {
  return a == Axis::Router || a == Axis::Routes || a == Axis::SharedGate || a == Axis::PerLayer || a == Axis::Latent;
}

// A device's features of a node's value: `range`, and where they are runs (Gated DeltaNet's value
// heads of some key heads) the same range `stride` further on, `repeats` times in all.
struct Runs {
  Range range;
  int64_t stride = 0, repeats = 1;
  int64_t size() const { return range.size() * repeats; }
};

// The rows of node n's output held in `r`, in its weight (and bias): a segment of a fused tensor
// starts at its row0.
WeightSlice rows_of(const Node& n, const std::string& tensor, Runs r) {
  return {tensor, Kind::Rows, {n.row0 + r.range.begin, n.row0 + r.range.end}, {}, r.stride, r.repeats};
}

// Makes ln compute graph node n whole, as on a lone device: full width, the whole weight and bias
// (of a fused tensor, its segment), every head (Rope and HeadNorm see q or k alone, so their heads
// are that input's).

void compute_whole(LocalNode& ln, const Node& n, const Graph& g) {
  const graph::Dims& d = g.dims;
  ln.width = n.width;
  ln.factor = n.factor;
  if (n.op == OpKind::Slice) ln.offset = n.row0;
  const bool segment = n.fused_rows > 0;
  const int64_t rows = is_expert_op(n.op) ? d.n_ff_exp : n.width;  // an expert segment: rows of each matrix
  if (!n.weight.empty())
    ln.weight = segment ? rows_of(n, n.weight, Runs{{0, rows}}) : WeightSlice{n.weight, Kind::Whole, {}};
  if (!n.bias.empty()) ln.bias = segment ? rows_of(n, n.bias, Runs{{0, rows}}) : WeightSlice{n.bias, Kind::Whole, {}};
  ln.q_heads = {0, d.n_head};
  ln.kv_heads = {0, d.n_head_kv_of(n.layer)};
  if (n.op == OpKind::Slice) {  // of each head of its input, on a heads axis; else of the whole width
    const Axis in = g.nodes[n.inputs[0]].axis;
    ln.q_heads = {0, std::max<int64_t>(1, graph::heads_of_axis(d, in, n.layer))};
    return;
  }
  if (n.op == OpKind::Rope || n.op == OpKind::HeadNorm) {
    const int64_t heads = n.axis == Axis::Latent ? 1 : n.width / graph::head_width(d, n);
    ln.q_heads = ln.kv_heads = {0, heads};
    ln.offset = n.row0;
  }
  if (is_expert_op(n.op)) ln.experts = {0, d.n_expert};
  if (n.op == OpKind::HeadMatMul) ln.weight.experts = ln.q_heads;
}

// Fills a finished device graph's weight bytes and KV values per token from its nodes.
void account(DeviceGraph& dg, const WeightTable& w) {
  const auto& d = dg.dims;
  for (const LocalNode& ln : dg.nodes) {
    for (const WeightSlice* s : {&ln.weight, &ln.bias}) {
      if (s->kind == Kind::None) continue;
      const auto& info = weight_info(w, s->tensor);
      const uint64_t bytes = slice_bytes(info, *s);
      dg.weight_bytes += bytes;
      if (ln.op == LocalOp::Embed)  // a lookup: one row per token
        dg.decode_bytes += row_bytes(info.type, info.cols);
      else if (is_expert_op(ln.op))  // each expert is selected by n_expert_used of n_expert tokens' slots
        dg.decode_bytes += bytes * static_cast<uint64_t>(d.n_expert_used) / static_cast<uint64_t>(d.n_expert);
      else
        dg.decode_bytes += bytes;
    }
    if (ln.op == LocalOp::LatentAttention) {  // one row of latent and RoPE key a token, on every device
      dg.kv_values_per_token += d.kv_lora_rank + d.rope.n_rot;
      continue;
    }
    // A sequence's recurrent state: each feature's last kernel - 1 inputs; each value head's matrix.
    if (ln.op == LocalOp::CausalConv) dg.state_values_per_slot += (d.linear_conv_kernel - 1) * ln.width;
    if (ln.op == LocalOp::DeltaNet) dg.state_values_per_slot += ln.width * d.linear_head_dim;
    if (ln.op != LocalOp::Attention || !d.owns_kv(ln.layer)) continue;
    dg.kv_values_per_token += 2 * ln.kv_heads.size() * d.head_dim_of(ln.layer);
    if (d.is_swa(ln.layer)) dg.kv_window_values += 2 * ln.kv_heads.size() * d.head_dim_of(ln.layer);
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
    const bool matmul = n.op == OpKind::MatMul || n.op == OpKind::ExpertMatMulSum;
    if (!matmul || n.inputs.empty() || g.nodes[n.inputs[0]].axis != axis) continue;
    blk = lcm(blk, block_size(weight_info(w, n.weight).type));
  }
  return blk;
}

// The granules of the reductions over a split axis (LocalNode::granule), functions of the model
// alone: every cut of the axis, for any device count, falls on a multiple of them. Heads: the
// attention output's quant block and a head of the layer (partitions() cuts whole heads on
// blocks; mark_granules). The FFN and each expert's: their block, and kFfnGranule features where
// the width leaves at least kFfnUnits of them (fixed point then adds one integer per that many
// products), less in a narrower one, so that ratios and memory caps still cut it finely.
constexpr int64_t kFfnGranule = 128, kFfnUnits = 16;
int64_t reduction_granule(int64_t width, int64_t blk) {
  int64_t granule = lcm(blk, kFfnGranule);
  while (granule % 2 == 0 && (granule / 2) % blk == 0 && width / granule < kFfnUnits) granule /= 2;
  return granule;
}
int64_t ffn_granule(const Graph& g, const WeightTable& w) {
  return reduction_granule(g.dims.n_ff, input_block(g, w, Axis::Ffn));
}
int64_t expert_granule(const Graph& g, const WeightTable& w) {
  return reduction_granule(g.dims.n_ff_exp, input_block(g, w, Axis::ExpertFfn));
}
int64_t shared_expert_granule(const Graph& g, const WeightTable& w) {
  return reduction_granule(g.dims.n_ff_shexp, input_block(g, w, Axis::SharedFfn));
}

// Gated DeltaNet's value features that follow one key head in a run: in the tiled order one value
// head in each block of key heads, in the grouped order all of its value heads.
int64_t linear_value_run(const graph::Dims& d) {
  return (d.linear_v_grouped ? d.linear_v_heads / d.linear_k_heads : 1) * d.linear_head_dim;
}

// Gated DeltaNet's key heads are cut in units of this many: each device's value heads are runs of
// whole quant blocks of the output projection's columns (else, the key heads in one piece).
int64_t linear_heads_unit(const Graph& g, const WeightTable& w) {
  const auto& d = g.dims;
  const int64_t blk = input_block(g, w, Axis::LinearVHeads), nk = d.linear_k_heads, run = linear_value_run(d);
  if ((nk * run) % blk != 0) return nk;
  int64_t unit = 1;
  while ((unit * run) % blk != 0) ++unit;
  return unit;
}

// Marks every matmul over the features of a split axis with that axis' granule.
void mark_granules(const Graph& g, const WeightTable& w, Plan& plan) {
  // Heads of their own size per layer (Gemma 4) make a layer's granule its own: every cut of a
  // layer falls on whole heads of it.
  const int64_t head_block = input_block(g, w, Axis::QHeads), ffn = ffn_granule(g, w);
  const int64_t experts = g.dims.n_expert > 0 ? expert_granule(g, w) : 0;
  const int64_t shared = g.dims.n_ff_shexp > 0 ? shared_expert_granule(g, w) : 0;
  for (DeviceGraph& dg : plan.devices)
    for (LocalNode& ln : dg.nodes) {
      if (ln.op == LocalOp::ExpertMatMulSum) ln.granule = experts;  // either split: an expert's width
      if (ln.op != LocalOp::MatMul || ln.source < 0) continue;
      const Axis in = g.nodes[g.nodes[ln.source].inputs[0]].axis;
      ln.granule = in == Axis::QHeads         ? lcm(g.dims.out_head_dim(ln.layer), head_block)
                   : in == Axis::Ffn          ? ffn
                   : in == Axis::SharedFfn    ? shared
                   : in == Axis::LinearVHeads ? linear_heads_unit(g, w) * linear_value_run(g.dims)
                                              : 0;
    }
}

// The KV heads that query heads `q` read, `group` query heads to a KV head (none for none).
Range kv_heads_read(Range q, int64_t group) {
  return q.empty() ? Range{0, 0} : Range{q.begin / group, (q.end - 1) / group + 1};
}

std::vector<Partition> partitions(const Graph& g, const WeightTable& w, const std::vector<double>& ratios) {
  const auto& d = g.dims;
  const int n_active = static_cast<int>(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r > 0; }));
  // Heads: whole GQA groups while there are enough KV heads, so no KV head is computed twice;
  // otherwise single query heads, and devices share (replicate) the KV heads they need. Either
  // way a boundary must fall on a quant block of the attention output's input features. Layers
  // whose heads differ (Gemma 4) share one cut of the query heads, whole groups of every layer's.
  int64_t min_kv = d.n_head_kv, groups = d.group();
  for (int l = 0; l < static_cast<int>(d.layer_heads.size()); ++l) {
    min_kv = std::min(min_kv, d.n_head_kv_of(l));
    groups = lcm(groups, d.group_of(l));
  }
  const int64_t base_heads = n_active <= min_kv ? groups : 1;
  int64_t heads_unit = base_heads;
  const int64_t blk = input_block(g, w, Axis::QHeads);
  auto on_blocks = [&](int64_t heads) {
    for (int l = -1; l < static_cast<int>(d.layer_heads.size()); ++l)
      if ((heads * d.out_head_dim(l)) % blk != 0) return false;
    return true;
  };
  while (!on_blocks(heads_unit) && heads_unit < d.n_head) heads_unit += base_heads;
  Partition q = cut(Axis::QHeads, d.n_head * d.head_dim, heads_unit * d.head_dim, ratios);
  Partition kv{Axis::KvHeads, d.head_dim, {}};
  for (const Range& r : q.ranges) {
    const Range h = kv_heads_read({r.begin / d.head_dim, r.end / d.head_dim}, d.group());
    kv.ranges.push_back({h.begin * d.head_dim, h.end * d.head_dim});
  }
  Partition ffn = cut(Axis::Ffn, d.n_ff, ffn_granule(g, w), ratios);
  Partition vocab = cut(Axis::Vocab, d.n_vocab, 1, ratios);
  std::vector<Partition> out{q, kv, ffn, vocab};
  // An expert's hidden width, cut alike in every expert (ranges of one slot's n_ff_exp features).
  if (d.n_expert > 0) out.push_back(cut(Axis::ExpertFfn, d.n_ff_exp, expert_granule(g, w), ratios));
  if (d.n_ff_shexp > 0) out.push_back(cut(Axis::SharedFfn, d.n_ff_shexp, shared_expert_granule(g, w), ratios));
  if (d.linear_k_heads > 0)
    out.push_back(cut(Axis::LinearKHeads, d.linear_k_heads * d.linear_head_dim,
                      linear_heads_unit(g, w) * d.linear_head_dim, ratios));
  return out;
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
  // Whether values of axis a are cut across devices (value heads follow their key heads' cut).
  bool splits(Axis a) const { return part(a == Axis::LinearVHeads ? Axis::LinearKHeads : a) != nullptr; }
  // Device d's features of axis a in `layer` (the heads' width and KV heads may be the layer's own).
  Range range(Axis a, int d, int layer = -1) const {
    if (a == Axis::QHeads || a == Axis::KvHeads) {
      const Range h = heads(a, d, layer);
      const int64_t hd = g_.dims.head_dim_of(layer);
      return {h.begin * hd, h.end * hd};
    }
    const Partition* p = part(a);
    if (a == Axis::Ffn && layer >= 0 && !g_.dims.layer_ff.empty())  // a layer of its own width, cut alike
      return p ? cut(a, g_.dims.n_ff_of(layer), p->unit, plan_.ratios).ranges[d] : Range{0, g_.dims.n_ff_of(layer)};
    return p ? p->ranges[d] : Range{0, g_.width_of(a)};
  }
  // Device d's features of node n's value: of a heads axis, its heads at the node's own width
  // per head (MLA's q, latents and outputs differ), else its range of the axis. Gated DeltaNet's
  // value heads: those of its key heads, a run in each block of linear_k_heads (tiled) or one run
  // (grouped).
  Runs features(const Node& n, int d) const {
    const auto& dims = g_.dims;
    if (n.axis == Axis::LinearKHeads || n.axis == Axis::LinearVHeads) {
      const Range h = key_heads(d);
      const int64_t hw = graph::head_width(dims, n);
      if (n.axis == Axis::LinearKHeads) return {{h.begin * hw, h.end * hw}};
      const int64_t blocks = dims.linear_v_heads / dims.linear_k_heads;
      if (dims.linear_v_grouped) return {{h.begin * blocks * hw, h.end * blocks * hw}};
      return {{h.begin * hw, h.end * hw}, blocks > 1 ? dims.linear_k_heads * hw : 0, blocks};
    }
    if (n.axis != Axis::QHeads && n.axis != Axis::KvHeads) return {range(n.axis, d, n.layer)};
    const Range h = heads(n.axis, d, n.layer);
    const int64_t hw = graph::head_width(dims, n);
    return {{h.begin * hw, h.end * hw}};
  }
  // Device d's Gated DeltaNet key heads.
  Range key_heads(int d) const {
    const Partition* p = part(Axis::LinearKHeads);
    const int64_t hd = g_.dims.linear_head_dim;
    return p ? Range{p->ranges[d].begin / hd, p->ranges[d].end / hd} : Range{0, g_.dims.linear_k_heads};
  }
  // Device d's heads of axis a in `layer`: its query heads (one cut for every layer), or the KV
  // heads those read in that layer.
  Range heads(Axis a, int d, int layer) const {
    const auto& dims = g_.dims;
    const Partition* p = part(Axis::QHeads);
    const Range q =
        p ? Range{p->ranges[d].begin / dims.head_dim, p->ranges[d].end / dims.head_dim} : Range{0, dims.n_head};
    return a == Axis::QHeads ? q : kv_heads_read(q, dims.group_of(layer));
  }
  bool expert_split() const { return n_ > 1 && plan_.moe_split == MoeSplit::Expert; }
  // The device that adds a bias to partial sums over axis a: the first holding any of it (a device
  // with an empty range computes no product to add it to).
  int bias_device(Axis a) const {
    for (int d = 0; d < n_; ++d)
      if (!range(a, d).empty()) return d;
    return 0;
  }
  // Features per token device d holds of a Split value of axis a. An ExpertFfn value has k slots:
  // each of its slice of n_ff_exp (tensor), or of the whole n_ff_exp where it holds any expert.
  int64_t local_width(Axis a, int d, int layer) const {
    const auto& dims = g_.dims;
    if (a != Axis::ExpertFfn) return range(a, d, layer).size();
    if (expert_split()) return plan_.experts[d].empty() ? 0 : dims.n_expert_used * dims.n_ff_exp;
    return dims.n_expert_used * range(a, d).size();
  }
  // What device d reads of an expert matmul's stacked weight (gate/up: rows; down: columns):
  // nothing where it holds no expert or no features.
  // Its biases ([width per slot, n_expert]: a row per expert) follow: the rows of its experts, or
  // each expert's features; down's (after the partial sums) are added by one device alone.
  void expert_slice(int d, const Node& n, bool down, LocalNode& ln) const {
    ln.width = down ? n.width : local_width(Axis::ExpertFfn, d, n.layer);
    const bool bias = !n.bias.empty();
    if (expert_split()) {
      ln.experts = plan_.experts[d];
      if (ln.experts.empty()) return;
      // A segment of fused experts (gate or up of ffn_gate_up_exps): those rows of each.
      ln.weight = n.fused_rows > 0 ? WeightSlice{n.weight, Kind::Rows, {n.row0, n.row0 + g_.dims.n_ff_exp}, ln.experts}
                                   : WeightSlice{n.weight, Kind::Whole, {}, ln.experts};
      const bool all = ln.experts.size() == g_.dims.n_expert;  // a one-expert bias is one row
      if (bias) ln.bias = all ? WeightSlice{n.bias, Kind::Whole, {}} : WeightSlice{n.bias, Kind::Rows, ln.experts};
      return;
    }
    const Range r = range(Axis::ExpertFfn, d);
    if (r.empty()) return;
    ln.experts = {0, g_.dims.n_expert};
    ln.weight = down ? WeightSlice{n.weight, Kind::Cols, r, {}} : rows_of(n, n.weight, Runs{r});
    if (bias && !down) ln.bias = {n.bias, Kind::Cols, r};
    if (bias && down && d == bias_device(Axis::ExpertFfn)) ln.bias = {n.bias, Kind::Whole, {}};
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
      if (op == LocalOp::AllGather)
        for (int d = 0; d < n_; ++d) {
          const Runs r = features(n, d);
          if (r.repeats > 1)
            fail("plan", "{} (layer {}): value heads held in runs cannot be gathered", n.label, n.layer);
          ln.gather.push_back(r.range);
        }
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
    emit(i, local_op(n.op), n.inputs, [&](int, LocalNode& ln) { compute_whole(ln, n, g_); });
    cur_[i] = State::Replicated;
  }

  void visit(int i) {
    const Node& n = g_.nodes[i];
    auto in_state = [&](int k) { return cur_[n.inputs[k]]; };
    auto in_axis = [&](int k) { return g_.nodes[n.inputs[k]].axis; };
    switch (n.op) {
      case OpKind::Embed:
      case OpKind::Scale:    // the residual stream's, kept replicated
      case OpKind::RmsNorm:  // needs the whole row: the residual stream is kept replicated
      case OpKind::MoeRoute: return replicate(i);
      case OpKind::MatMul: {
        const int in = n.inputs[0];
        // A kept-whole input (MLA's compressed query) may still feed a column-parallel matmul.
        if (kept_whole(n.axis) || (kept_whole(in_axis(0)) && !splits(n.axis))) return replicate(i);
        if (in_state(0) == State::Partial) collective(in, LocalOp::AllReduce);
        if (cur_[in] == State::Replicated && splits(n.axis)) {  // column-parallel
          emit(i, LocalOp::MatMul, n.inputs, [&](int d, LocalNode& ln) {
            ln.width = features(n, d).size();
            ln.weight = rows_of(n, n.weight, features(n, d));
            if (!n.bias.empty()) ln.bias = rows_of(n, n.bias, features(n, d));
          });
          cur_[i] = State::Split;
          return;
        }
        if (cur_[in] == State::Split && in_axis(0) != Axis::KvHeads && n.fused_rows == 0) {  // row-parallel
          emit(i, LocalOp::MatMul, n.inputs, [&](int d, LocalNode& ln) {
            ln.width = n.width;
            const Runs r = features(g_.nodes[in], d);
            ln.weight = {n.weight, Kind::Cols, r.range, {}, r.stride, r.repeats};
            // The bias is added once, by one device, so that the partial sums add up to it.
            if (!n.bias.empty() && d == bias_device(in_axis(0))) ln.bias = {n.bias, Kind::Whole, {}};
          });
          cur_[i] = State::Partial;
          return;
        }
        return fallback(i, "matmul output axis is not split");
      }
      case OpKind::HeadNorm:
      case OpKind::Rope: {
        if (kept_whole(n.axis)) return replicate(i);  // MLA's RoPE key: one head, on every device
        if (in_state(0) != State::Split) return fallback(i, "input is not split");
        emit(i, local_op(n.op), n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          if (!n.weight.empty()) ln.weight = {n.weight, Kind::Whole, {}};
          if (n.axis == Axis::QHeads || n.axis == Axis::KvHeads) ln.q_heads = ln.kv_heads = heads(n.axis, d, n.layer);
          ln.offset = n.row0;
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::Slice: {  // of each head held, on a heads axis split by heads
        // Gated DeltaNet's fused projections (qwen3next): each key head's features, then its value
        // heads' (the grouped order: one run a device).
        const bool by_key_heads =
            in_axis(0) == Axis::LinearKHeads &&
            (n.axis == Axis::LinearKHeads || (n.axis == Axis::LinearVHeads && g_.dims.linear_v_grouped));
        const bool by_q_heads = in_axis(0) == Axis::QHeads && n.axis == Axis::QHeads;
        if (in_state(0) != State::Split || !(by_q_heads || by_key_heads)) return replicate(i);
        emit(i, LocalOp::Slice, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          ln.q_heads = by_q_heads ? heads(Axis::QHeads, d, n.layer) : key_heads(d);
          ln.offset = n.row0;
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::CausalConv: {  // each device its features' taps and state
        if (in_state(0) != State::Split) return fallback(i, "input is not split");
        emit(i, LocalOp::CausalConv, n.inputs, [&](int d, LocalNode& ln) {
          const Runs r = features(n, d);
          ln.width = r.size();
          ln.weight = rows_of(n, n.weight, r);
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::DeltaNet: {  // each device its key heads with their value heads and states
        bool by_heads = true;
        for (int k = 0; k < 5; ++k) by_heads = by_heads && in_state(k) == State::Split;
        if (!by_heads) return fallback(i, "q/k/v are not split by heads");
        emit(i, LocalOp::DeltaNet, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          const Runs per_head = features(g_.nodes[n.inputs[3]], d);  // one value a value head
          ln.weight = rows_of(n, n.weight, per_head);
          ln.bias = rows_of(n, n.bias, per_head);
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::HeadMatMul: {  // each device its heads' matrices
        if (in_state(0) != State::Split || in_axis(0) != Axis::QHeads)
          return fallback(i, "input is not split by heads");
        emit(i, LocalOp::HeadMatMul, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          ln.q_heads = heads(Axis::QHeads, d, n.layer);
          if (!ln.q_heads.empty()) ln.weight = {n.weight, Kind::Whole, {}, ln.q_heads};  // (empty: every matrix)
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::LatentAttention: {  // each device its query heads over a whole latent cache of its own
        make_replicated(n.inputs[2]);
        make_replicated(n.inputs[3]);
        const bool by_heads = in_state(0) == State::Split && in_state(1) == State::Split;
        if (!by_heads) return fallback(i, "queries are not split by heads");
        emit(i, LocalOp::LatentAttention, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          ln.q_heads = heads(Axis::QHeads, d, n.layer);
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::Attention: {
        // q, k and v; or q alone over an earlier layer's cache, which the same heads of this device hold
        const bool own_kv = n.inputs.size() == 3;
        const bool by_heads = in_state(0) == State::Split && in_axis(0) == Axis::QHeads &&
                              (!own_kv || (in_state(1) == State::Split && in_state(2) == State::Split &&
                                           in_axis(1) == Axis::KvHeads && in_axis(2) == Axis::KvHeads));
        if (!by_heads) return fallback(i, "q/k/v are not split by heads");
        emit(i, LocalOp::Attention, n.inputs, [&](int d, LocalNode& ln) {
          ln.width = features(n, d).size();
          ln.q_heads = heads(Axis::QHeads, d, n.layer);
          ln.kv_heads = heads(Axis::KvHeads, d, n.layer);
          if (!n.weight.empty()) ln.weight = {n.weight, Kind::Rows, ln.q_heads};  // the sinks of its heads
        });
        cur_[i] = State::Split;
        return;
      }
      case OpKind::ExpertMatMul:  // column-parallel: rows of each expert, or whole experts
      case OpKind::ExpertMatMulSum: {
        const bool down = n.op == OpKind::ExpertMatMulSum;
        make_replicated(n.inputs[1]);  // the routes
        if (!down) make_replicated(n.inputs[0]);
        const bool splits = n_ > 1 && (down ? in_state(0) == State::Split : true);
        if (!splits) return replicate(i);
        emit(i, local_op(n.op), n.inputs, [&](int d, LocalNode& ln) { expert_slice(d, n, down, ln); });
        cur_[i] = down ? State::Partial : State::Split;  // down: each device's slots summed, then all-reduced
        return;
      }
      case OpKind::SigmoidScale:
        if (g_.nodes[n.inputs[1]].width == n.width && n.width > 1) {  // element by element: split alike
          if (in_state(0) == State::Split && in_state(1) == State::Split && in_axis(0) == in_axis(1)) {
            emit(i, LocalOp::SigmoidScale, n.inputs, [&](int d, LocalNode& ln) { ln.width = features(n, d).size(); });
            cur_[i] = State::Split;
            return;
          }
          return replicate(i);
        }
        // a per-token scale is linear: a partial sum stays partial
        make_replicated(n.inputs[1]);
        if (in_state(0) != State::Partial) return replicate(i);
        emit(i, LocalOp::SigmoidScale, n.inputs, [&](int, LocalNode& ln) { ln.width = n.width; });
        cur_[i] = State::Partial;
        return;
      case OpKind::SwiGlu:
      case OpKind::GeGlu:
      case OpKind::SwiGluOai:
      case OpKind::Add: {
        // Two partial sums add up to a partial sum (the experts and the shared expert): one
        // all-reduce completes both.
        if (n.op == OpKind::Add && in_state(0) == State::Partial && in_state(1) == State::Partial) {
          emit(i, LocalOp::Add, n.inputs, [&](int, LocalNode& ln) { ln.width = n.width; });
          cur_[i] = State::Partial;
          return;
        }
        // A partial addend is completed first: the residual stream stays replicated (Megatron).
        for (int k = 0; k < 2; ++k)
          if (in_state(k) == State::Partial) collective(n.inputs[k], LocalOp::AllReduce);
        const bool both_split = in_state(0) == State::Split && in_state(1) == State::Split && in_axis(0) == in_axis(1);
        if (both_split) {
          emit(i, local_op(n.op), n.inputs, [&](int d, LocalNode& ln) {
            ln.width = in_axis(0) == Axis::ExpertFfn ? local_width(in_axis(0), d, n.layer) : features(n, d).size();
          });
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

// Checks each matmul's weight against the graph before any slicing relies on it: [in, out] for a
// matrix, [in per slot, out per slot, n_expert] for a stack of experts.
void check_weights(const Graph& g, const WeightTable& w) {
  const auto& d = g.dims;
  for (const Node& n : g.nodes) {
    if (n.op == OpKind::HeadMatMul) {  // a matrix per head, reading the first cols of its input head
      const auto& wi = weight_info(w, n.weight);
      const int64_t in_head = graph::head_width(d, g.nodes[n.inputs[0]]), out_head = graph::head_width(d, n);
      if (wi.mats != d.n_head || wi.rows != out_head || wi.cols > in_head || wi.cols <= 0)
        fail("plan", "tensor '{}' is {}x{}x{}, the graph needs {} heads of {} rows over at most {} features", n.weight,
             wi.cols, wi.rows, wi.mats, d.n_head, out_head, in_head);
      continue;
    }
    if (n.op != OpKind::MatMul && !is_expert_op(n.op)) continue;
    const auto& wi = weight_info(w, n.weight);
    int64_t in = g.nodes[n.inputs[0]].width, out = n.width, mats = 1;
    if (n.op == OpKind::ExpertMatMul) out = d.n_ff_exp, mats = d.n_expert;
    if (n.op == OpKind::ExpertMatMulSum) in = d.n_ff_exp, mats = d.n_expert;
    if (n.fused_rows > 0) {  // one segment of a fused tensor (of each expert's matrix)
      if (n.op == OpKind::ExpertMatMulSum || (is_expert_op(n.op) && !n.bias.empty()))
        fail("plan", "{}: fused experts are gate and up, without biases", n.label);
      if (wi.cols != in || wi.rows != n.fused_rows || wi.mats != mats || n.row0 < 0 || n.row0 + out > n.fused_rows)
        fail("plan", "fused tensor '{}' is {}x{}x{}, the graph needs {}x{} (rows {}..{} for {})", n.weight, wi.cols,
             wi.rows, wi.mats, in, n.fused_rows, n.row0, n.row0 + out, n.label);
      continue;
    }
    if (wi.cols != in || wi.rows != out || wi.mats != mats)
      fail("plan", "tensor '{}' is {}x{}x{}, the graph needs {}x{}x{}", n.weight, wi.cols, wi.rows, wi.mats, in, out,
           mats);
  }
}

// How far a cut's shares stray from the ratios: the largest |share - ratio| over devices.
double imbalance(const std::vector<Range>& cut, int64_t total, const std::vector<double>& ratios) {
  double worst = 0;
  for (size_t i = 0; i < cut.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(cut[i].size()) / static_cast<double>(total) - ratios[i]));
  return worst;
}

// How much more a tensor cut may stray than an expert cut before whole experts are preferred: the
// expert split pays its own imbalance at run time (a token's k experts rarely fall evenly).
constexpr double kExpertSplitMargin = 0.1;

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

MoeSplit choose_moe_split(const Graph& g, const WeightTable& weights, const std::vector<double>& ratios,
                          MoeSplit requested, std::string* why) {
  const auto& d = g.dims;
  std::string reason;
  MoeSplit m = requested;
  const auto r = normalise(ratios);
  const auto by_experts = proportional_ranges(d.n_expert, r);
  const Partition by_rows = cut(Axis::ExpertFfn, d.n_ff_exp, d.n_expert > 0 ? expert_granule(g, weights) : 1, r);
  const double dev_e = d.n_expert > 0 ? imbalance(by_experts, d.n_expert, r) : 0;
  const double dev_t = d.n_expert > 0 ? imbalance(by_rows.ranges, d.n_ff_exp, r) : 0;
  if (d.n_expert == 0) {
    m = MoeSplit::Tensor;
    reason = "no experts";
  } else if (r.size() == 1) {
    m = MoeSplit::Tensor;
    reason = "one device holds every expert";
  } else if (requested != MoeSplit::Auto) {
    reason = "as asked (--moe-split)";
  } else if (dev_t > dev_e + kExpertSplitMargin) {
    m = MoeSplit::Expert;
    reason = fmt::format(
        "quant blocks of {} features cut each expert's {} too coarsely (shares off the ratios by up to {:.0f}%, whole "
        "experts by {:.0f}%)",
        by_rows.unit, d.n_ff_exp, 100 * dev_t, 100 * dev_e);
  } else {
    m = MoeSplit::Tensor;
    reason = fmt::format(
        "every device reads its share of each selected expert (within {:.0f}% of its ratio), so decode is balanced "
        "whatever the router picks",
        100 * dev_t);
  }
  if (why) *why = reason;
  return m;
}

Plan plan_tensor(const Graph& g, const WeightTable& weights, const std::vector<double>& ratios, MoeSplit moe) {
  check_weights(g, weights);
  Plan plan;
  plan.mode = ratios.size() > 1 ? SplitMode::Tensor : SplitMode::None;
  plan.ratios = normalise(ratios);
  plan.moe_split = choose_moe_split(g, weights, ratios, moe, &plan.moe_reason);
  plan.partitions = partitions(g, weights, plan.ratios);
  if (plan.moe_split == MoeSplit::Expert) {
    plan.experts = proportional_ranges(g.dims.n_expert, plan.ratios);
    std::erase_if(plan.partitions, [](const Partition& p) { return p.axis == Axis::ExpertFfn; });
  }
  TensorPlanner(g, weights, plan).run();
  mark_granules(g, weights, plan);
  return plan;
}

Plan plan_layers(const Graph& g, const WeightTable& weights, const std::vector<double>& ratios) {
  check_weights(g, weights);
  Plan plan;
  plan.mode = SplitMode::Layer;
  plan.ratios = normalise(ratios);
  plan.layers = proportional_ranges(g.dims.n_layer, plan.ratios);
  // Layers attending over an earlier layer's cache (Gemma 4 E2B/E4B) stay on the device holding
  // it: a boundary past the first such cache's layer moves down to it.
  int first_shared = g.dims.n_layer;
  for (int l = 0; l < g.dims.n_layer; ++l)
    if (!g.dims.owns_kv(l)) first_shared = std::min(first_shared, g.dims.kv_layer_of(l));
  for (size_t d = 1; d < plan.layers.size(); ++d)
    if (plan.layers[d].begin > first_shared && plan.layers[d].begin < g.dims.n_layer)
      plan.layers[d - 1].end = plan.layers[d].begin = first_shared;
  const int n = static_cast<int>(plan.ratios.size());
  const int n_nodes = static_cast<int>(g.nodes.size());
  plan.states.assign(n_nodes, State::Replicated);
  plan.devices.resize(n);
  // Nodes before the first block: the embedding goes to device 0, which hands it on as the
  // residual stream; the per-layer inputs (Gemma 4 E2B/E4B) are computed from the tokens by each
  // device whose layers read them. Nodes after the last block (output norm, logits) go to the last
  // device; the blocks in between follow plan.layers.
  const int first_block = static_cast<int>(
      std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& x) { return x.layer >= 0; }) - g.nodes.begin());
  auto per_layer_input = [&](int i) { return i < first_block && g.nodes[i].axis != graph::Axis::Embd; };
  auto owner = [&](const Node& node, int idx) {
    if (node.layer >= 0) {
      for (int d = 0; d < n; ++d)
        if (node.layer >= plan.layers[d].begin && node.layer < plan.layers[d].end) return d;
    }
    if (per_layer_input(idx)) return -1;
    return idx < first_block ? 0 : n - 1;
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
    auto emit = [&](int i, auto&& input_of) {
      const Node& node = g.nodes[i];
      LocalNode ln{.op = local_op(node.op), .source = i, .layer = node.layer, .label = node.label};
      for (int in : node.inputs) ln.inputs.push_back(input_of(in));
      compute_whole(ln, node, g);
      dg.nodes.push_back(std::move(ln));
      local[i] = static_cast<int>(dg.nodes.size()) - 1;
    };
    // A node before the blocks, and what it reads, computed here.
    auto materialize = [&](int i, auto&& self) -> void {
      for (int in : g.nodes[i].inputs)
        if (local[in] < 0) self(in, self);
      emit(i, [&](int in) { return local[in]; });
    };
    for (int i = 0; i < n_nodes; ++i) {
      if (owner(g.nodes[i], i) != d) continue;
      for (int in : g.nodes[i].inputs)
        if (local[in] < 0 && per_layer_input(in)) materialize(in, materialize);
      emit(i, [&](int in) {
        if (local[in] >= 0) return local[in];
        // Produced on an earlier device: the residual stream it handed over.
        WEFT_ASSERT(d > 0 && g.nodes[in].axis == graph::Axis::Embd && (residual < 0 || residual == in));
        residual = in;
        return 0;
      });
    }
    dg.has_logits = d == n - 1;
    dg.passes_residual = !dg.has_logits;
    dg.output = static_cast<int>(dg.nodes.size()) - 1;
    if (dg.has_logits) dg.vocab = {0, g.dims.n_vocab};
    account(dg, weights);
  }
  mark_granules(g, weights, plan);
  return plan;
}

Plan make_plan(SplitMode mode, const Graph& g, const WeightTable& weights, const std::vector<double>& ratios,
               MoeSplit moe) {
  switch (mode) {
    case SplitMode::None: return plan_tensor(g, weights, {1.0}, moe);
    case SplitMode::Tensor: return plan_tensor(g, weights, ratios, moe);
    case SplitMode::Layer: return plan_layers(g, weights, ratios);
  }
  fail("plan", "unknown split mode");
}

}  // namespace weft::parallel
