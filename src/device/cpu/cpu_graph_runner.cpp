#include "device/cpu/cpu_graph_runner.h"

#include "core/error.h"
#include "core/progress.h"
#include "core/system_memory.h"
#include "device/buffer_plan.h"
#include "device/group_member.h"
#include "device/step_layout.h"
#include "kernels/fixed_point.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

namespace weft::device {

using parallel::LocalOp;
using Clock = std::chrono::steady_clock;

CpuGraphRunner::CpuGraphRunner(int n_threads, const Placement& placement, bool spin, bool map_weights,
                               bool repack_mapped, parallel::Group* group)
    : pool_(n_threads, placement, spin),
      group_(group),
      store_(placement.numa_node, map_weights, repack_mapped, uint64_t{1} << 30, &pool_) {}

void CpuGraphRunner::load(const parallel::DeviceGraph& graph, const gguf::File& f, const LoadOptions& opt) {
  graph_ = graph;
  opt_ = opt;
  nodes_ = std::vector<NodeState>(graph_.nodes.size());
  const auto& d = graph_.dims;
  windows_ = KvWindows(d, opt);
  Progress progress("loading weights", graph_.nodes.size(), "nodes");  // shared by the devices loading
  // --exact: every matrix batch-invariant (a token's bits whatever its step's token count)
  auto matrix = [&](const parallel::WeightSlice& s, WeightStore::Use use) {
    kernels::WeightMatrix m = store_.matrix(f, s, use);
    m.batch_invariant = opt.exact;
    return m;
  };
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    progress.add(1);
    const auto& ln = graph_.nodes[i];
    NodeState& ns = nodes_[i];
    switch (ln.op) {
      case LocalOp::Embed:
      case LocalOp::MatMul:
        ns.w = matrix(ln.weight, ln.op == LocalOp::MatMul ? WeightStore::Use::Matmul : WeightStore::Use::Lookup);
        if (ln.bias.kind != parallel::WeightSlice::Kind::None) ns.bias = store_.vector(f, ln.bias);
        break;
      case LocalOp::RmsNorm:
      case LocalOp::HeadNorm:  // no weight (Gemma 4's v norm): ones
        ns.vec = ln.weight.kind == parallel::WeightSlice::Kind::None ? std::vector<float>(d.head_dim_of(ln.layer), 1.f)
                                                                     : store_.vector(f, ln.weight);
        break;
      case LocalOp::Scale:
        ns.vec = ln.weight.kind == parallel::WeightSlice::Kind::None ? std::vector<float>{ln.factor}
                                                                     : store_.vector(f, ln.weight);
        break;
      case LocalOp::MoeRoute:  // a per-expert output scale and a selection bias, where the model has them
        if (ln.weight.kind != parallel::WeightSlice::Kind::None) ns.vec = store_.vector(f, ln.weight);
        if (ln.bias.kind != parallel::WeightSlice::Kind::None) ns.bias = store_.vector(f, ln.bias);
        for (const auto* v : {&ns.vec, &ns.bias})
          if (!v->empty() && static_cast<int64_t>(v->size()) != d.n_expert)
            fail("cpu", "{}: {} values per expert for {} experts", ln.label, v->size(), d.n_expert);
        break;
      case LocalOp::HeadMatMul: {  // a matrix per head held
        const int64_t n = ln.q_heads.size();
        if (ln.weight.kind == parallel::WeightSlice::Kind::None && n == 0 && ln.width == 0) break;  // no heads here
        const kernels::WeightMatrix m = matrix(ln.weight, WeightStore::Use::Experts);
        const int64_t in_w = ln.inputs.size() == 1 ? graph_.nodes[ln.inputs[0]].width : -1;
        if (n <= 0 || m.rows % n || ln.width != m.rows || in_w % n != 0 || m.cols > in_w / n)
          fail("cpu", "{}: {} rows of {} columns for {} heads of {} inputs", ln.label, m.rows, m.cols, n, in_w);
        ns.experts = {m, ln.q_heads.begin, n, m.rows / n};
        break;
      }
      case LocalOp::Rope: {
        const int64_t heads = ln.q_heads.size();
        if (heads > 0 && (ln.width % heads != 0 || ln.offset + d.rope_of(ln.layer).n_rot > ln.width / heads))
          fail("cpu", "{}: {} rotated dims from {} in heads of {}", ln.label, d.rope_of(ln.layer).n_rot, ln.offset,
               heads > 0 ? ln.width / heads : 0);
        break;
      }
      case LocalOp::LatentAttention: {  // one cache of [latent; k_rope] rows, read as keys and values
        if (opt.k_type != DType::F32 && opt.k_type != DType::F16)
          fail("cpu", "KV cache type {}: f32 or f16", dtype_name(opt.k_type));
        ns.kv_rows = opt.n_ctx;
        ns.kv_node = static_cast<int>(i);
        const int64_t row = d.kv_lora_rank + d.rope.n_rot;
        if (row > kernels::AttentionRows::kMaxHeadDim)
          fail("cpu", "{}: latent rows of {}, the attention kernel takes at most {}", ln.label, row,
               kernels::AttentionRows::kMaxHeadDim);
        // Widths as the kernel reads them (a graph from the network is checked here).
        const int64_t heads = ln.q_heads.size();
        auto width = [&](int k) { return graph_.nodes[ln.inputs[k]].width; };
        if (ln.inputs.size() != 4 || heads < 0 || ln.width != heads * d.kv_lora_rank || width(0) != ln.width ||
            width(2) != d.kv_lora_rank || width(3) != d.rope.n_rot ||
            (heads > 0 && (width(1) % heads != 0 || width(1) / heads < d.rope.n_rot)))
          fail("cpu", "{}: inputs of widths that do not fit {} heads over latents of {}", ln.label, heads,
               d.kv_lora_rank);
        ns.k_cache =
            HugeBuffer(row_bytes(opt.k_type, int64_t{opt.n_seq} * ns.kv_rows * row), "cpu", "the latent cache");
        ns.kv_of_q.assign(heads, 0);
        break;
      }
      case LocalOp::CausalConv: {  // the file's row of taps per feature, held as a row of features per tap
        const std::vector<float> taps = store_.vector(f, ln.weight);
        const int64_t kernel = d.linear_conv_kernel;
        if (static_cast<int64_t>(taps.size()) != ln.width * kernel)
          fail("cpu", "{}: {} taps for {} features of {}", ln.label, taps.size(), ln.width, kernel);
        ns.vec = kernels::conv_taps_by_tap(taps, ln.width, kernel);
        ns.state_floats = ln.width * (d.linear_conv_kernel - 1);
        ns.state.assign(static_cast<size_t>(ns.state_floats * opt.state_slots()), 0.f);
        recurrent_ = true;
        break;
      }
      case LocalOp::DeltaNet: {  // ssm_a and ssm_dt, one value a value head
        const int64_t hd = d.linear_head_dim, vh = hd > 0 ? ln.width / hd : 0;
        auto width = [&](int k) { return graph_.nodes[ln.inputs[k]].width; };
        const int64_t kh = hd > 0 ? width(0) / hd : 0;  // a device may hold no heads (more devices than key heads)
        if (ln.inputs.size() != 5 || hd <= 0 || ln.width % hd || width(0) != width(1) || width(0) % hd ||
            width(2) != ln.width || width(3) != vh || width(4) != vh || (kh == 0) != (vh == 0) || (kh > 0 && vh % kh))
          fail("cpu", "{}: inputs of widths that do not fit value heads of {} over key heads", ln.label, hd);
        ns.vec = store_.vector(f, ln.weight);
        ns.bias = store_.vector(f, ln.bias);
        if (static_cast<int64_t>(ns.vec.size()) != vh || static_cast<int64_t>(ns.bias.size()) != vh)
          fail("cpu", "{}: {} and {} decay values for {} value heads", ln.label, ns.vec.size(), ns.bias.size(), vh);
        ns.state_floats = vh * hd * hd;
        ns.state.assign(static_cast<size_t>(ns.state_floats * opt.state_slots()), 0.f);
        recurrent_ = true;
        break;
      }
      case LocalOp::ExpertMatMul:
      case LocalOp::ExpertMatMulSum: {
        if (ln.weight.kind == parallel::WeightSlice::Kind::None) break;  // holds none of this layer's experts
        const kernels::WeightMatrix m = matrix(ln.weight, WeightStore::Use::Experts);
        const int64_t n = ln.experts.size();
        if (n <= 0 || m.rows % n) fail("cpu", "{}: {} rows for {} experts", ln.label, m.rows, n);
        ns.experts = {m, ln.experts.begin, n, m.rows / n};
        if (ln.bias.kind == parallel::WeightSlice::Kind::None) break;
        ns.bias = store_.vector(f, ln.bias);
        if (static_cast<int64_t>(ns.bias.size()) != m.rows)
          fail("cpu", "{}: {} bias values for {} experts of {} rows", ln.label, ns.bias.size(), n, m.rows / n);
        ns.experts.bias = ns.bias.data();
        break;
      }
      case LocalOp::Attention: {
        // Refused here: the kernel's own check would throw on a pool thread, mid-step.
        if (d.head_dim_of(ln.layer) > kernels::AttentionRows::kMaxHeadDim)
          fail("cpu", "{}: heads {} wide, the attention kernel takes at most {}", ln.label, d.head_dim_of(ln.layer),
               kernels::AttentionRows::kMaxHeadDim);
        for (DType t : {opt.k_type, opt.v_type})
          if (t != DType::F32 && t != DType::F16) fail("cpu", "KV cache type {}: f32 or f16", dtype_name(t));
        if (ln.weight.kind != parallel::WeightSlice::Kind::None) {
          ns.vec = store_.vector(f, ln.weight);
          if (static_cast<int64_t>(ns.vec.size()) != ln.q_heads.size())
            fail("cpu", "{}: {} sinks for {} q heads", ln.label, ns.vec.size(), ln.q_heads.size());
        }
        ns.windowed = d.is_swa(ln.layer) && windows_.active();
        ns.kv_rows = ns.windowed ? windows_.rows() : opt.n_ctx;
        ns.kv_node = kv_cache_node(graph_, static_cast<int>(i), "cpu");
        if (ns.kv_node == static_cast<int>(i)) {
          const int64_t n = int64_t{opt.n_seq} * ns.kv_rows * ln.kv_heads.size() * d.head_dim_of(ln.layer);
          ns.k_cache = HugeBuffer(row_bytes(opt.k_type, n), "cpu", "the K cache");
          ns.v_cache = HugeBuffer(row_bytes(opt.v_type, n), "cpu", "the V cache");
        }
        for (int64_t h = ln.q_heads.begin; h < ln.q_heads.end; ++h)
          ns.kv_of_q.push_back(static_cast<int32_t>(h / d.group_of(ln.layer) - ln.kv_heads.begin));
        for (int64_t h = 0; h < static_cast<int64_t>(ns.kv_of_q.size()); ++h)
          if (h == 0 || ns.kv_of_q[h] != ns.kv_of_q[h - 1])
            ns.head_runs.emplace_back(h, h + 1);
          else
            ns.head_runs.back().second = h + 1;
        break;
      }
      default: break;
    }
  }
  populate_kv_caches();
  readers_.assign(graph_.nodes.size(), {});
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    for (int in : graph_.nodes[i].inputs)
      if (readers_[in].empty() || readers_[in].back() != static_cast<int>(i))
        readers_[in].push_back(static_cast<int>(i));
  mark_fixed_values();
  plan_buffers(opt.max_tokens);
  n_cached_.assign(opt.state_slots(), 0);
}

// Buffers from the kind-neutral plan (device/buffer_plan.h), allocated in this process.
void CpuGraphRunner::plan_buffers(int32_t max_tokens) {
  const BufferPlan p = device::plan_buffers(graph_, max_tokens);
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].buffer = p.node_buffer[i];
  buffers_.clear();
  for (size_t n : p.buffer_floats) buffers_.emplace_back(n, 0.f);
}

StepResult CpuGraphRunner::run(const Step& step) {
  if (step.reread) return kept_.reread(graph_, step, "cpu");
  const auto t0 = Clock::now();
  check_step(step, opt_, n_cached_, "cpu");
  move_states(step, opt_, graph_.dims.recurrent(), n_cached_, "cpu");
  for (const StateCopy& c : step.state_copies)
    for (NodeState& ns : nodes_)
      if (!ns.state.empty())
        std::copy_n(ns.state.begin() + c.from * ns.state_floats, ns.state_floats,
                    ns.state.begin() + c.to * ns.state_floats);
  if (recurrent_) check_recurrent_step(step, n_cached_, "cpu");
  const StepLayout l = layout_step(step, opt_.n_ctx);
  const int64_t n_tokens = l.n_tokens;
  next_base_ = windows_.advance(step, "cpu");
  ++step_id_;
  for (int i = 0; i < static_cast<int>(fixed_.size()); ++i) release_fixed(i);  // left by a step that threw
  for (int i = 0; i < static_cast<int>(graph_.nodes.size()); ++i) {
    const auto ts = Clock::now();
    try {
      exec(i, {step, n_tokens, l.pos, l.kv_row, l.out_rows, l.seq_first});
    } catch (...) {
      if (group_) group_->abort();  // peers must not wait for this device in a collective
      throw;
    }
    const double s = std::chrono::duration<double>(Clock::now() - ts).count();
    const LocalOp op = graph_.nodes[i].op;
    if (op == LocalOp::AllReduce || op == LocalOp::AllGather) stats_.collective_seconds += s;
    stats_.op_seconds[static_cast<size_t>(op)] += s;
  }
  for (const StepSeq& q : step.seqs) n_cached_[q.seq] = q.pos0 + q.n_tokens;
  windows_.commit(std::move(next_base_));

  // The output node computed the logits of out_rows only, one row each (see matmul).
  StepResult r = assemble_result(graph_, step, l, out(graph_.output));
  kept_.keep(graph_, step, l, out(graph_.output));
  stats_.step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  stats_.steps++;
  return r;
}

// A matmul whose activation conversion serves every reader of `node` at this token count, when all
// of them are matmuls over every token: then the producer can be fused with that conversion.
const kernels::WeightMatrix* CpuGraphRunner::fusable_matmul(int node, int64_t n_tokens) const {
  const auto& readers = readers_[node];
  if (readers.empty()) return nullptr;
  int layout = -1;
  for (int r : readers) {
    if (graph_.nodes[r].op != LocalOp::MatMul || (r == graph_.output && graph_.has_logits)) return nullptr;
    const int l = kernels::activation_layout(nodes_[r].w, n_tokens);
    if (layout >= 0 && l != layout) return nullptr;
    layout = l;
  }
  return &nodes_[readers[0]].w;
}

static kernels::MoeRouting moe_routing(const graph::Dims& d, const std::vector<float>& expert_scale,
                                       const std::vector<float>& selection_bias) {
  kernels::MoeRouting r{d.n_expert, d.n_expert_used, d.expert_weights_norm,
                        d.expert_gating == graph::Dims::Gating::SoftmaxSelected,
                        expert_scale.empty() ? nullptr : expert_scale.data()};
  r.sigmoid = d.expert_gating == graph::Dims::Gating::Sigmoid;
  r.selection_bias = selection_bias.empty() ? nullptr : selection_bias.data();
  r.n_groups = d.n_expert_groups;
  r.n_groups_used = d.n_group_used;
  r.weights_scale = d.expert_weights_scale;
  return r;
}

// The input of an op that runs in place (see plan_buffers) already is its output.
static void copy_input(float* y, const float* x, int64_t n) {
  if (y != x) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

// One node of the step: the elementwise ops here, the ones with more to them in the methods below.
void CpuGraphRunner::exec(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const auto& d = graph_.dims;
  float* y = out(i);
  auto in = [&](int k) { return out(ln.inputs[k]); };
  const int64_t n = c.n_tokens * ln.width;  // output floats
  const int64_t hd = d.head_dim_of(ln.layer);
  switch (ln.op) {
    case LocalOp::Input:
      if (static_cast<int64_t>(c.step.input.size()) != n)
        fail("cpu", "input of {} floats, expected {}", c.step.input.size(), n);
      std::memcpy(y, c.step.input.data(), c.step.input.size() * sizeof(float));
      return;
    case LocalOp::Embed: return embed(i, c);
    case LocalOp::RmsNorm:
      return produce_rows(i, c, [&, w = ln.width](int64_t t) {
        kernels::rms_norm(in(0) + t * w, nodes_[i].vec.data(), y + t * w, 1, w, d.norm_eps);
      });
    case LocalOp::MatMul: return matmul(i, c);
    case LocalOp::HeadNorm: {  // heads as wide as the weight (Gated DeltaNet's value heads)
      const int64_t head = static_cast<int64_t>(nodes_[i].vec.size());
      return for_each_index(pool_, c.n_tokens, [&, w = ln.width](int64_t t) {
        copy_input(y + t * w, in(0) + t * w, w);
        kernels::rms_norm_heads(y + t * w, nodes_[i].vec.data(), 1, w / head, head, d.norm_eps);
      });
    }
    case LocalOp::Rope: {
      // Heads of this node's own width, rotated from their feature `offset` on (MLA's q: the last
      // n_rot of each head; its k_rope: one head).
      const int64_t heads = ln.q_heads.size(), w = ln.width, hw = heads > 0 ? w / heads : hd, off = ln.offset;
      return for_each_index(pool_, c.n_tokens, [&](int64_t t) {
        copy_input(y + t * w, in(0) + t * w, w);
        if (off == 0) return kernels::rope(y + t * w, 1, heads, hw, c.pos.data() + t, d.rope_of(ln.layer));
        for (int64_t h = 0; h < heads; ++h)
          kernels::rope(y + t * w + h * hw + off, 1, 1, hw - off, c.pos.data() + t, d.rope_of(ln.layer));
      });
    }
    case LocalOp::Attention: return attention(i, c);
    case LocalOp::SwiGlu:
      return produce_rows(
          i, c, [&, w = ln.width](int64_t t) { kernels::swiglu(in(0) + t * w, in(1) + t * w, y + t * w, w); });
    case LocalOp::GeGlu:
      return produce_rows(i, c,
                          [&, w = ln.width](int64_t t) { kernels::geglu(in(0) + t * w, in(1) + t * w, y + t * w, w); });
    case LocalOp::SwiGluOai:
      return produce_rows(i, c, [&, w = ln.width](int64_t t) {
        kernels::swiglu_oai(in(0) + t * w, in(1) + t * w, y + t * w, w, d.swiglu_alpha, d.swiglu_limit);
      });
    case LocalOp::Add:
      if (fixed_value_[i]) return carry_fixed(i, c);
      return for_each_index(pool_, c.n_tokens, [&, w = ln.width](int64_t t) {
        copy_input(y + t * w, in(0) + t * w, w);
        kernels::add_inplace(y + t * w, in(1) + t * w, w);
      });
    case LocalOp::Scale:
      return for_each_index(pool_, c.n_tokens, [&, w = ln.width](int64_t t) {
        copy_input(y + t * w, in(0) + t * w, w);
        kernels::scale_row(y + t * w, nodes_[i].vec.at(0), w);
      });
    case LocalOp::Slice: {        // of each head (one head: the whole width)
      if (ln.width == 0) return;  // a device without heads of a split axis
      const int64_t heads = std::max<int64_t>(1, ln.q_heads.size()), in_w = graph_.nodes[ln.inputs[0]].width;
      const int64_t hw_in = in_w / heads, hw = ln.width / heads;
      for (int64_t t = 0; t < c.n_tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
          std::memcpy(y + t * ln.width + h * hw, in(0) + t * in_w + h * hw_in + ln.offset,
                      static_cast<size_t>(hw) * sizeof(float));
      return;
    }
    case LocalOp::AllReduce:
      if (fixed_value_[ln.inputs[0]]) return all_reduce_fixed(i, n);
      copy_input(y, in(0), n);
      if (group_ && !overlaps_all_reduce(ln.inputs[0], c)) group_->all_reduce_sum(y, n);  // else done by matmul
      return;
    case LocalOp::AllGather: return all_gather(i, c);
    case LocalOp::MoeRoute:
      kernels::moe_route(in(0), c.n_tokens, moe_routing(d, nodes_[i].vec, nodes_[i].bias), y);
      return;
    case LocalOp::HeadMatMul: return head_matmul(i, c);
    case LocalOp::LatentAttention: return latent_attention(i, c);
    case LocalOp::ExpertMatMul:
    case LocalOp::ExpertMatMulSum: return expert_op(i, c);
    case LocalOp::SigmoidScale:
      if (fixed_value_[i]) return carry_fixed(i, c);
      if (graph_.nodes[ln.inputs[1]].width == ln.width && ln.width > 1)  // element by element, a token a task
        return for_each_index(pool_, c.n_tokens, [&, w = ln.width](int64_t t) {
          kernels::sigmoid_scale(in(0) + t * w, in(1) + t * w, y + t * w, 1, w, w);
        });
      kernels::sigmoid_scale(in(0), in(1), y, c.n_tokens, ln.width);
      return;
    case LocalOp::CausalConv: return causal_conv(i, c);
    case LocalOp::DeltaNet: return delta_net(i, c);
    case LocalOp::Count: break;
  }
  fail("cpu", "op {} is not implemented on the CPU device", parallel::local_op_name(ln.op));
}

float* CpuGraphRunner::slot_state(int i, const StepSeq& q) {
  NodeState& ns = nodes_[i];
  float* s = ns.state.data() + q.seq * ns.state_floats;
  if (q.pos0 == 0) std::fill(s, s + ns.state_floats, 0.f);  // the sequence starts over
  return s;
}

void CpuGraphRunner::causal_conv(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const int64_t w = ln.width, kernel = graph_.dims.linear_conv_kernel;
  if (w == 0) return;
  const float* x = out(ln.inputs[0]);
  float* y = out(i);
  const float* taps = nodes_[i].vec.data();
  // Features are independent: chunks of them across the pool, each over the sequence's tokens.
  constexpr int64_t kChunk = 64;
  for (size_t s = 0; s < c.step.seqs.size(); ++s) {
    const StepSeq& q = c.step.seqs[s];
    float* state = slot_state(i, q);
    const int64_t t0 = c.seq_first[s];
    for_each_index(pool_, (w + kChunk - 1) / kChunk, [&](int64_t k) {
      const int64_t f0 = k * kChunk, n = std::min(kChunk, w - f0);
      kernels::causal_conv_silu(x + t0 * w + f0, q.n_tokens, n, w, taps + f0, kernel, state + f0, y + t0 * w + f0);
    });
  }
}

void CpuGraphRunner::delta_net(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const auto& d = graph_.dims;
  NodeState& ns = nodes_[i];
  const int64_t hd = d.linear_head_dim, vw = ln.width, vh = vw / hd;
  if (vw == 0) return;
  const int64_t kw = graph_.nodes[ln.inputs[0]].width, kh = kw / hd, n_tokens = c.n_tokens;
  auto in = [&](int k) { return out(ln.inputs[k]); };
  // q and k L2-normed, once per key head (several value heads read each); each value head's gates.
  delta_qk_.resize(static_cast<size_t>(2 * n_tokens * kw));
  delta_gates_.resize(static_cast<size_t>(n_tokens * vh));
  float *qn = delta_qk_.data(), *kn = qn + n_tokens * kw;
  for_each_index(pool_, n_tokens, [&](int64_t t) {
    std::memcpy(qn + t * kw, in(0) + t * kw, static_cast<size_t>(kw) * sizeof(float));
    std::memcpy(kn + t * kw, in(1) + t * kw, static_cast<size_t>(kw) * sizeof(float));
    kernels::l2_norm_heads(qn + t * kw, kh, hd, d.norm_eps);
    kernels::l2_norm_heads(kn + t * kw, kh, hd, d.norm_eps);
    for (int64_t h = 0; h < vh; ++h)
      delta_gates_[t * vh + h] = kernels::delta_gates(in(3)[t * vh + h], in(4)[t * vh + h], ns.vec[h], ns.bias[h]);
  });
  delta_states_.clear();
  for (const StepSeq& q : c.step.seqs) delta_states_.push_back(slot_state(i, q));
  // Every (sequence, value head) pair is independent; a device's share keeps the files' order of
  // value heads over key heads (tiled or grouped).
  const int64_t n_seqs = static_cast<int64_t>(c.step.seqs.size());
  float* y = out(i);
  // Prompts take the chunked form, except under --exact, whose bits may not depend on how a
  // prompt is cut into steps.
  const bool chunked = !opt_.exact;
  for_each_index(pool_, n_seqs * vh, [&](int64_t item) {
    const int64_t s = item / vh, h = item % vh, t0 = c.seq_first[s], kk = d.linear_key_head(h, kh);
    kernels::delta_rule(delta_states_[s] + h * hd * hd, hd, c.step.seqs[s].n_tokens, qn + t0 * kw + kk * hd,
                        kn + t0 * kw + kk * hd, in(2) + t0 * vw + h * hd, kw, vw, delta_gates_.data() + t0 * vh + h, vh,
                        y + t0 * vw + h * hd, chunked);
  });
}

void CpuGraphRunner::produce_rows(int i, const StepCtx& c, const kernels::RowProducer& row) {
  const kernels::WeightMatrix* m = fusable_matmul(i, c.n_tokens);
  if (!m) return for_each_index(pool_, c.n_tokens, row);
  // The op and the activation conversion in one pass over each row (its readers convert nothing).
  kernels::prepare_activations(*m, out(i), graph_.nodes[i].width, c.n_tokens, pool_, scratch_, row);
  held_ = {i, step_id_, kernels::activation_layout(*m, c.n_tokens)};
}

void CpuGraphRunner::embed(int i, const StepCtx& c) {
  const NodeState& ns = nodes_[i];
  const int64_t w = graph_.nodes[i].width;
  float* y = out(i);
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const auto id = c.step.tokens[t];
    if (id < 0 || id >= ns.w.rows) fail("cpu", "token id {} outside the vocabulary (0..{})", id, ns.w.rows - 1);
  }
  const auto& k = kernels::kernels_for(ns.w.type);
  const float scale = graph_.nodes[i].factor;
  for_each_index(pool_, c.n_tokens, [&](int64_t t) {
    k.dequantize(ns.w.data + ns.w.row_stride * c.step.tokens[t], y + t * w, w);
    if (scale > 0 && scale != 1) kernels::scale_row(y + t * w, scale, w);
  });
}

void CpuGraphRunner::matmul(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const int64_t w = ln.width;
  float* y = out(i);
  // Logits are needed for the last token of each sequence that asks for them only.
  const bool last_only = i == graph_.output && graph_.has_logits;
  const int64_t k = graph_.nodes[ln.inputs[0]].width;
  const int64_t rows = last_only ? static_cast<int64_t>(c.out_rows.size()) : c.n_tokens;
  const float* x = out(ln.inputs[0]);
  if (w == 0 || rows == 0) return;
  if (last_only) {
    logit_rows_.resize(rows * k);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&logit_rows_[r * k], x + c.out_rows[r] * k, k * sizeof(float));
    x = logit_rows_.data();
  }
  WEFT_ASSERT(ns.w.rows == w && ns.w.cols == k);
  if (sums_fixed(i)) return matmul_fixed(i, x, k, rows);
  if (overlaps_all_reduce(i, c)) {
    // In chunks of tokens: each chunk's partial sums go to the all-reduce (on the collective
    // thread) while the next chunk computes; the all-reduce node then finds its work done. Every
    // rank takes this path for the same steps (same graph shape, token count and group), so the
    // chunks' collectives line up.
    if (!collectives_) collectives_ = std::make_unique<CollectiveThread>();
    try {
      for (int64_t t0 = 0; t0 < rows; t0 += kOverlapTokens) {
        const int64_t n = std::min(kOverlapTokens, rows - t0);
        float* yc = y + t0 * w;
        matmul_rows(i, x + t0 * k, k, n, yc, /*prepare=*/true);
        collectives_->submit([this, yc, n, w] { group_->all_reduce_sum(yc, static_cast<size_t>(n * w)); });
      }
    } catch (...) {  // no chunk left behind in a collective, nor its error for the next step
      group_->abort();
      try {
        collectives_->wait();
      } catch (...) {
      }
      throw;
    }
    held_ = {};  // scratch_ holds the last chunk's activations only
    const auto tw = Clock::now();
    collectives_->wait();
    const double waited = std::chrono::duration<double>(Clock::now() - tw).count();
    stats_.collective_seconds += waited;  // in the profile as all_reduce, not as this matmul
    stats_.op_seconds[static_cast<size_t>(LocalOp::AllReduce)] += waited;
    stats_.op_seconds[static_cast<size_t>(LocalOp::MatMul)] -= waited;
    return;
  }
  if (k > 0) prepare_input(i, x, k, rows, last_only);
  matmul_rows(i, x, k, rows, y, /*prepare=*/false);
}

// Q, K and V (gate and up) read one input: converted once, by the first of them or its producer.
// The output's rows (`rows_of_x`: some tokens' rows, copied) are converted every time.
void CpuGraphRunner::prepare_input(int i, const float* x, int64_t k, int64_t rows, bool rows_of_x) {
  const NodeState& ns = nodes_[i];
  const HeldActivations want{graph_.nodes[i].inputs[0], step_id_, kernels::activation_layout(ns.w, rows)};
  if (!rows_of_x && held_ == want) return;
  kernels::prepare_activations(ns.w, x, k, rows, pool_, scratch_);
  held_ = rows_of_x ? HeldActivations{} : want;
}

// y = this node's weights x the rows of x (converted into scratch_ first when `prepare`, else
// already there), plus its bias; zeros where the device holds no input features (row-parallel:
// nothing to add).
void CpuGraphRunner::matmul_rows(int i, const float* x, int64_t k, int64_t rows, float* y, bool prepare) {
  const NodeState& ns = nodes_[i];
  const int64_t w = graph_.nodes[i].width;
  if (k == 0) {
    std::fill(y, y + rows * w, 0.f);
    return;
  }
  if (prepare) kernels::prepare_activations(ns.w, x, k, rows, pool_, scratch_);
  kernels::matmul_prepared(ns.w, x, k, rows, y, w, pool_, scratch_);
  if (!ns.bias.empty())
    for (int64_t t = 0; t < rows; ++t) kernels::add_inplace(y + t * w, ns.bias.data(), w);
}

bool CpuGraphRunner::sums_fixed(int i) const {
  const auto& ln = graph_.nodes[i];
  const bool op = ln.op == LocalOp::MatMul || ln.op == LocalOp::ExpertMatMulSum;
  return opt_.exact && op && ln.granule > 0 && !(i == graph_.output && graph_.has_logits);
}

// The sums a split cuts, and what carries them to their all-reduce unchanged in value: a shared
// expert's gate (its sigmoid applied to each granule's partial before it becomes an integer, so
// its node must come after the gate's) and the add of two such sums.
void CpuGraphRunner::mark_fixed_values() {
  const int n = static_cast<int>(graph_.nodes.size());
  fixed_value_.assign(n, 0);
  fixed_.assign(n, {});
  for (int i = 0; i < n; ++i) {
    const auto& ln = graph_.nodes[i];
    const auto fixed_in = [&](size_t j) { return ln.inputs.size() > j && fixed_value_[ln.inputs[j]]; };
    if (ln.op == LocalOp::SigmoidScale && fixed_in(0) && readers_[ln.inputs[0]].size() == 1) {
      if (ln.inputs[1] > ln.inputs[0]) fail("cpu", "--exact: the gate of {} comes after the sum it scales", ln.label);
      fixed_value_[i] = 1;
    }
    fixed_value_[i] |= sums_fixed(i) || (ln.op == LocalOp::Add && fixed_in(0) && fixed_in(1));
  }
}

std::vector<int64_t>& CpuGraphRunner::new_fixed(int i, int64_t n) {
  std::vector<int64_t>& v = fixed_[i];
  if (v.empty() && !spare_fixed_.empty()) {
    v = std::move(spare_fixed_.back());
    spare_fixed_.pop_back();
  }
  v.assign(static_cast<size_t>(n), 0);
  return v;
}

void CpuGraphRunner::release_fixed(int i) {
  if (fixed_[i].capacity() > 0) spare_fixed_.push_back(std::move(fixed_[i]));
  fixed_[i] = {};
}

// Bias first (one device's share of a partial sum, scaled as the products are), then the granules.
void CpuGraphRunner::matmul_fixed(int i, const float* x, int64_t k, int64_t rows) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const int64_t w = ln.width;
  std::vector<int64_t>& acc = new_fixed(i, rows * w);
  const float* scale = gate_scale(i, rows);
  if (!ns.bias.empty()) {
    std::vector<float> b(ns.bias.begin(), ns.bias.end());
    for (int64_t t = 0; t < rows; ++t) {
      if (scale)
        for (int64_t o = 0; o < w; ++o) b[o] = ns.bias[o] * scale[t];
      kernels::add_fixed(b.data(), acc.data() + t * w, w);
    }
  }
  if (k > 0) {
    prepare_input(i, x, k, rows, /*rows_of_x=*/false);
    kernels::matmul_prepared_fixed(ns.w, x, k, rows, ln.granule, acc.data(), w, pool_, scratch_, scale);
  }
  finish_fixed(i, rows * w);
}

// Node i's per-token sigmoid of its gate where its one reader is a fixed-point SigmoidScale; else null.
const float* CpuGraphRunner::gate_scale(int i, int64_t rows) {
  const auto& readers = readers_[i];
  if (readers.size() != 1 || !fixed_value_[readers[0]] || graph_.nodes[readers[0]].op != LocalOp::SigmoidScale)
    return nullptr;
  const float* g = out(graph_.nodes[readers[0]].inputs[1]);
  gate_.resize(static_cast<size_t>(rows));
  for (int64_t t = 0; t < rows; ++t) gate_[t] = kernels::sigmoid_gate(g[t]);
  return gate_.data();
}

// Sums read in fixed point (by an all-reduce, a gate or an add of sums) stay for those readers;
// any other reader gets floats.
void CpuGraphRunner::finish_fixed(int i, int64_t n) {
  const auto& readers = readers_[i];
  const auto reads_fixed = [&](int r) { return fixed_value_[r] || graph_.nodes[r].op == LocalOp::AllReduce; };
  const bool kept = std::any_of(readers.begin(), readers.end(), reads_fixed);
  if (!std::all_of(readers.begin(), readers.end(), reads_fixed) || !kept)
    kernels::fixed_to_f32(fixed_[i].data(), out(i), n);
  if (!kept) release_fixed(i);
}

// A shared expert's gated sum (the gate applied in its products) or the add of two sums.
void CpuGraphRunner::carry_fixed(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const int64_t n = c.n_tokens * ln.width;
  std::vector<int64_t>& y = new_fixed(i, n);
  for (int in : ln.inputs) {
    if (!fixed_value_[in]) continue;  // the gate
    WEFT_ASSERT(static_cast<int64_t>(fixed_[in].size()) == n);
    kernels::add_fixed_sums(fixed_[in].data(), y.data(), n);
    release_fixed(in);
  }
  finish_fixed(i, n);
}

void CpuGraphRunner::all_reduce_fixed(int i, int64_t n) {
  const int src = graph_.nodes[i].inputs[0];
  std::vector<int64_t>& v = fixed_[src];
  WEFT_ASSERT(static_cast<int64_t>(v.size()) == n);
  if (group_) group_->all_reduce_sum_exact(v.data(), static_cast<size_t>(n));
  kernels::fixed_to_f32(v.data(), out(i), n);
  release_fixed(src);
}

// Prompts over a network group: a row-parallel matmul (its one reader the all-reduce of its
// partial sums) of at least two chunks. Decided from what every rank sees alike.
bool CpuGraphRunner::overlaps_all_reduce(int i, const StepCtx& c) const {
  if (!group_ || !group_->waits_on_network() || c.n_tokens < 2 * kOverlapTokens) return false;
  if (i == graph_.output && graph_.has_logits) return false;
  const auto& readers = readers_[i];
  return readers.size() == 1 && graph_.nodes[readers[0]].op == LocalOp::AllReduce;
}

// Writes the step's rows ([n_tokens, n_kv heads, head_dim] f32) into a KV cache of `type`, laid
// out [slot][kv head][rows][head_dim] (kernels::attention reads each slot head-major); row r of a
// slot holds position base[slot] + r (base: null, all 0, unless the cache is a sliding window's).
static void store_kv(HugeBuffer& cache, DType type, const float* rows, int64_t n_tokens, int64_t n_kv, int64_t hd,
                     int64_t n_ctx, int64_t n_rows, const int64_t* base, const int64_t* kv_row) {
  const size_t head_row = row_bytes(type, hd);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t slot = kv_row[t] / n_ctx, row = kv_row[t] % n_ctx - (base ? base[slot] : 0);
    WEFT_ASSERT(row >= 0 && row < n_rows);
    for (int64_t h = 0; h < n_kv; ++h) {
      const float* src = rows + (t * n_kv + h) * hd;
      uint8_t* dst = cache.data() + static_cast<size_t>((slot * n_kv + h) * n_rows + row) * head_row;
      if (type == DType::F16)
        kernels::f32_to_f16_row(src, reinterpret_cast<uint16_t*>(dst), hd);
      else
        std::memcpy(dst, src, head_row);
    }
  }
}

// The KV caches are backed at load, as llama.cpp clears its cache at load, so that the first
// requests pay no page faults; where they would take over half the memory left (a -c far past
// what is used), their pages still come as positions are written.
void CpuGraphRunner::populate_kv_caches() {
  size_t bytes = 0;
  for (const NodeState& ns : nodes_) bytes += ns.k_cache.size() + ns.v_cache.size();
  const std::optional<uint64_t> left = available_memory_bytes();
  if (bytes == 0 || !left || bytes > *left / 2) return;
  for (NodeState& ns : nodes_)
    if (!ns.k_cache.populate() || !ns.v_cache.populate()) return;
}

void CpuGraphRunner::attention(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  NodeState& ns = nodes_[i];
  const auto& d = graph_.dims;
  if (ln.width == 0) return;
  const int64_t n_kv = ln.kv_heads.size(), hd = d.head_dim_of(ln.layer), kvw = n_kv * hd;
  const int64_t* base = ns.windowed ? next_base_.data() : nullptr;  // each slot's row 0 (null: position 0)
  NodeState& kv = nodes_[ns.kv_node];  // an earlier layer's, which stored this step's rows already
  if (ns.kv_node == i) {
    if (ns.windowed) move_windows(ns, n_kv, hd, c);
    store_kv(ns.k_cache, opt_.k_type, out(ln.inputs[1]), c.n_tokens, n_kv, hd, opt_.n_ctx, ns.kv_rows, base,
             c.kv_row.data());
    store_kv(ns.v_cache, opt_.v_type, out(ln.inputs[2]), c.n_tokens, n_kv, hd, opt_.n_ctx, ns.kv_rows, base,
             c.kv_row.data());
  }
  kernels::AttentionShape s{0, ln.q_heads.size(), n_kv, hd, d.attention_scale(ln.layer)};
  s.rows_only = opt_.exact;  // one kernel for every token count: a token's bits whatever its step
  if (d.is_swa(ln.layer)) s.window = d.n_swa;
  s.k_type = opt_.k_type;
  s.v_type = opt_.v_type;
  s.n_ctx = ns.kv_rows;
  if (!ns.vec.empty()) s.sinks = ns.vec.data();
  const int64_t qw = ln.width;  // == n_q_heads * head_dim, also the output width
  const size_t k_slot = row_bytes(opt_.k_type, kvw) * ns.kv_rows, v_slot = row_bytes(opt_.v_type, kvw) * ns.kv_rows;
  const float* q = out(ln.inputs[0]);
  float* y = out(i);
  // The pool's work items are (sequence, kv head) pairs: a batch of decoding sequences gives it
  // sequences x kv heads small items to balance, not a few wide head ranges, and the kernel reads
  // each kv head's cache rows once for all the q heads of its group. With fewer items than two
  // per thread (one long prompt on a device holding one or two kv heads), (sequence, q head).
  const int64_t n_seqs = static_cast<int64_t>(c.step.seqs.size());
  const bool per_head = n_seqs * static_cast<int64_t>(ns.head_runs.size()) < 2 * pool_.size();
  const int64_t n_units = per_head ? s.n_q_heads : static_cast<int64_t>(ns.head_runs.size()),
                n_items = n_seqs * n_units;
  pool_.parallel_steal(n_items, pool_.steal_chunk(n_items, 1, 4), [&](int64_t b, int64_t e) {
    kernels::AttentionShape part = s;
    for (int64_t item = b; item < e; ++item) {
      const int64_t si = item / n_units, ts = c.seq_first[si], u = item % n_units;
      const StepSeq& sq = c.step.seqs[si];
      std::tie(part.head_begin, part.head_end) = per_head ? std::pair{u, u + 1} : ns.head_runs[u];
      part.n_tokens = sq.n_tokens;
      part.kv_pos0 = base ? base[sq.seq] : 0;
      kernels::attention(part, q + ts * qw, kv.k_cache.data() + sq.seq * k_slot, kv.v_cache.data() + sq.seq * v_slot,
                         ns.kv_of_q.data(), c.pos.data() + ts, y + ts * qw);
    }
  });
}

// Per head held: its matrix times the first `cols` features of that head's input, every token.
void CpuGraphRunner::head_matmul(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const kernels::ExpertStack& w = nodes_[i].experts;
  const int64_t in_w = graph_.nodes[ln.inputs[0]].width, heads = ln.q_heads.size();
  if (heads == 0 || c.n_tokens == 0) return;
  const int64_t in_head = in_w / heads, out_head = ln.width / heads;
  WEFT_ASSERT(w.rows == out_head && w.w.cols <= in_head);
  kernels::head_matmul(w, out(ln.inputs[0]), in_w, in_head, c.n_tokens, out(i), pool_, moe_scratch_);
}

// MLA, absorbed: each token's [latent; k_rope] row goes into the cache, then every head attends
// over the rows with a query of [q_latent; q_rope] as one head of kv_lora_rank + n_rot dims whose
// values are the same rows: the first kv_lora_rank features of each output are the softmax-
// weighted latents.
void CpuGraphRunner::latent_attention(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  NodeState& ns = nodes_[i];
  const auto& d = graph_.dims;
  const int64_t heads = ln.q_heads.size(), lat = d.kv_lora_rank, rot = d.rope.n_rot, row = lat + rot;
  const float* q_lat = out(ln.inputs[0]);
  const float* q = out(ln.inputs[1]);
  const float* latent = out(ln.inputs[2]);
  const float* k_rope = out(ln.inputs[3]);
  const int64_t q_w = graph_.nodes[ln.inputs[1]].width, hd = heads > 0 ? q_w / heads : 0;
  mla_rows_.resize(static_cast<size_t>(c.n_tokens * row));
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    std::memcpy(&mla_rows_[t * row], latent + t * lat, lat * sizeof(float));
    std::memcpy(&mla_rows_[t * row + lat], k_rope + t * rot, rot * sizeof(float));
  }
  store_kv(ns.k_cache, opt_.k_type, mla_rows_.data(), c.n_tokens, 1, row, opt_.n_ctx, ns.kv_rows, nullptr,
           c.kv_row.data());
  if (heads == 0) return;
  mla_q_.resize(static_cast<size_t>(c.n_tokens * heads * row));
  mla_out_.resize(mla_q_.size());
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      float* dst = &mla_q_[(t * heads + h) * row];
      std::memcpy(dst, q_lat + (t * heads + h) * lat, lat * sizeof(float));
      std::memcpy(dst + lat, q + t * q_w + h * hd + hd - rot, rot * sizeof(float));
    }
  kernels::AttentionShape s{0, heads, 1, row, d.attention_scale(ln.layer)};
  s.rows_only = opt_.exact;  // one kernel for every token count: a token's bits whatever its step
  s.k_type = s.v_type = opt_.k_type;
  s.n_ctx = ns.kv_rows;
  const size_t slot = row_bytes(opt_.k_type, row) * ns.kv_rows;
  // (sequence, run of q heads) items, two per thread where there are heads enough: the heads of a
  // run share a kernel call (its rows fill the vector lanes together: a decoding token's heads)
  // and every head reads the one cache row per key, so a row's result is the same in any run.
  const int64_t n_seqs = static_cast<int64_t>(c.step.seqs.size());
  const int64_t runs = std::clamp<int64_t>((2 * pool_.size() + n_seqs - 1) / n_seqs, 1, heads),
                per_run = (heads + runs - 1) / runs, n_items = n_seqs * runs;
  pool_.parallel_steal(n_items, pool_.steal_chunk(n_items, 1, 4), [&](int64_t b, int64_t e) {
    kernels::AttentionShape part = s;
    for (int64_t item = b; item < e; ++item) {
      const int64_t si = item / runs, ts = c.seq_first[si], h = item % runs * per_run;
      if (h >= heads) continue;
      const StepSeq& sq = c.step.seqs[si];
      part.head_begin = h;
      part.head_end = std::min(heads, h + per_run);
      part.n_tokens = sq.n_tokens;
      const uint8_t* cache = ns.k_cache.data() + sq.seq * slot;
      kernels::attention(part, &mla_q_[ts * heads * row], cache, cache, ns.kv_of_q.data(), c.pos.data() + ts,
                         &mla_out_[ts * heads * row]);
    }
  });
  float* y = out(i);
  for (int64_t r = 0; r < c.n_tokens * heads; ++r) std::memcpy(y + r * lat, &mla_out_[r * row], lat * sizeof(float));
}

// A sliding-window cache whose slot this step moves on: the keys its sequence still needs (from the
// new base up to the step's first position) go to the front of each kv head's rows. The two ranges
// never overlap (graph/kv_window.h: a move happens only past twice the window and a step).
void CpuGraphRunner::move_windows(NodeState& ns, int64_t n_kv, int64_t hd, const StepCtx& c) {
  for (const KvWindows::Move& m : windows_.moves(c.step, next_base_))
    for (auto [cache, type] : {std::pair{&ns.k_cache, opt_.k_type}, std::pair{&ns.v_cache, opt_.v_type}}) {
      const size_t row = row_bytes(type, hd);
      for (int64_t h = 0; h < n_kv; ++h) {
        uint8_t* head = cache->data() + static_cast<size_t>((m.seq * n_kv + h) * ns.kv_rows) * row;
        std::memmove(head, head + static_cast<size_t>(m.src_row) * row, static_cast<size_t>(m.n_rows) * row);
      }
    }
}

// Gate/up (one output slot per selected expert) or down with the routes' weighted sum, over the
// experts this device holds; a device holding none adds zeros to the all-reduce.
void CpuGraphRunner::expert_op(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  const kernels::ExpertStack& w = nodes_[i].experts;
  const int64_t k = graph_.dims.n_expert_used;
  const float* x = out(ln.inputs[0]);
  const float* routes = out(ln.inputs[1]);
  float* y = out(i);
  if (ln.op == LocalOp::ExpertMatMul) {
    if (ln.width > 0) kernels::expert_matmul(w, x, routes, k, c.n_tokens, y, pool_, moe_scratch_);
  } else if (sums_fixed(i)) {
    std::vector<int64_t>& acc = new_fixed(i, c.n_tokens * ln.width);
    if (w.n > 0)
      kernels::expert_matmul_sum_fixed(w, x, routes, k, c.n_tokens, ln.granule, acc.data(), pool_, moe_scratch_);
    finish_fixed(i, c.n_tokens * ln.width);
  } else if (w.n == 0) {
    std::fill_n(y, c.n_tokens * ln.width, 0.f);
  } else {
    kernels::expert_matmul_sum(w, x, routes, k, c.n_tokens, y, pool_, moe_scratch_);
  }
}

void CpuGraphRunner::all_gather(int i, const StepCtx& c) {
  const auto& ln = graph_.nodes[i];
  WEFT_ASSERT(group_ && static_cast<int>(ln.gather.size()) == group_->size());
  all_gather_rows(*group_, out(ln.inputs[0]), ln.gather, c.n_tokens, ln.width, gather_tmp_, out(i));
}

}  // namespace weft::device
