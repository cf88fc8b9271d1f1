#include "graph/graph.h"

#include "core/error.h"

#include <cmath>

namespace weft::graph {

std::string_view axis_name(Axis a) {
  switch (a) {
    case Axis::Embd: return "embd";
    case Axis::QHeads: return "q_heads";
    case Axis::KvHeads: return "kv_heads";
    case Axis::Ffn: return "ffn";
    case Axis::Vocab: return "vocab";
    case Axis::Router: return "router";
    case Axis::Routes: return "routes";
    case Axis::ExpertFfn: return "expert_ffn";
    case Axis::SharedFfn: return "shared_ffn";
    case Axis::SharedGate: return "shared_gate";
    case Axis::PerLayer: return "per_layer";
    case Axis::Latent: return "latent";
    case Axis::LinearKHeads: return "linear_k_heads";
    case Axis::LinearVHeads: return "linear_v_heads";
    case Axis::Count: break;
  }
  return "?";
}

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::Embed: return "embed";
    case OpKind::RmsNorm: return "rms_norm";
    case OpKind::MatMul: return "matmul";
    case OpKind::HeadNorm: return "head_norm";
    case OpKind::Rope: return "rope";
    case OpKind::Attention: return "attention";
    case OpKind::SwiGlu: return "swiglu";
    case OpKind::Add: return "add";
    case OpKind::MoeRoute: return "moe_route";
    case OpKind::ExpertMatMul: return "expert_matmul";
    case OpKind::ExpertMatMulSum: return "expert_matmul_sum";
    case OpKind::SigmoidScale: return "sigmoid_scale";
    case OpKind::GeGlu: return "geglu";
    case OpKind::SwiGluOai: return "swiglu_oai";
    case OpKind::Scale: return "scale";
    case OpKind::Slice: return "slice";
    case OpKind::HeadMatMul: return "head_matmul";
    case OpKind::LatentAttention: return "latent_attention";
    case OpKind::CausalConv: return "causal_conv";
    case OpKind::DeltaNet: return "delta_net";
    case OpKind::Count: break;
  }
  return "?";
}

float Dims::attention_scale(int layer) const {
  return attn_scale > 0 ? attn_scale : 1.f / std::sqrt(static_cast<float>(head_dim_of(layer)));
}

int64_t heads_of_axis(const Dims& d, Axis a, int layer) {
  switch (a) {
    case Axis::QHeads: return d.n_head;
    case Axis::KvHeads: return d.n_head_kv_of(layer);
    case Axis::LinearKHeads: return d.linear_k_heads;
    case Axis::LinearVHeads: return d.linear_v_heads;
    default: return 0;
  }
}

int64_t head_width(const Dims& d, const Node& n) {
  const int64_t heads = heads_of_axis(d, n.axis, n.layer);
  return heads > 0 ? n.width / heads : n.width;
}

int Graph::add(Node n) {
  const int id = static_cast<int>(nodes.size());
  for (int in : n.inputs) WEFT_ASSERT(in >= 0 && in < id);
  nodes.push_back(std::move(n));
  return id;
}

int64_t Graph::width_of(Axis a) const {
  switch (a) {
    case Axis::Embd: return dims.n_embd;
    case Axis::QHeads: return dims.n_head * dims.head_dim;
    case Axis::KvHeads: return dims.n_head_kv * dims.head_dim;
    case Axis::Ffn: return dims.n_ff;
    case Axis::Vocab: return dims.n_vocab;
    case Axis::Router: return dims.n_expert;
    case Axis::Routes: return 2 * dims.n_expert_used;
    case Axis::ExpertFfn: return dims.n_expert_used * dims.n_ff_exp;
    case Axis::SharedFfn: return dims.n_ff_shexp;
    case Axis::SharedGate: return 1;
    case Axis::PerLayer: return dims.n_layer * dims.n_embd_per_layer;
    case Axis::Latent: return dims.kv_lora_rank + dims.rope.n_rot;
    case Axis::LinearKHeads: return dims.linear_k_heads * dims.linear_head_dim;
    case Axis::LinearVHeads: return dims.linear_v_heads * dims.linear_head_dim;
    case Axis::Count: break;
  }
  fail("graph", "bad axis");
}

}  // namespace weft::graph
