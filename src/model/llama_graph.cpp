#include "model/llama_graph.h"

#include <fmt/format.h>

namespace weft::model {

using graph::Axis;
using graph::Node;
using graph::OpKind;

graph::Graph build_llama_graph(const ModelConfig& c) {
  graph::Graph g;
  g.dims = c.dims;
  const auto& d = c.dims;
  const int64_t q_width = d.n_head * d.head_dim;      // (n_head, head_dim)
  const int64_t kv_width = d.n_head_kv * d.head_dim;  // (n_head_kv, head_dim)

  // x: the residual stream (n_embd), token embeddings to start with.
  int x = g.add({OpKind::Embed, {}, Axis::Embd, d.n_embd, "token_embd.weight", "", -1, "token_embd"});
  for (int l = 0; l < d.n_layer; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    auto node = [&](OpKind op, std::vector<int> in, Axis axis, int64_t width, std::string weight, std::string label,
                    std::string bias = "") {
      return g.add({op, std::move(in), axis, width, weight.empty() ? "" : blk + weight, bias.empty() ? "" : blk + bias,
                    l, std::move(label)});
    };
    // Attention: h = norm(x); q, k, v projections (column-parallel); RoPE; attend; project back.
    int h = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "attn_norm.weight", "attn_norm");
    const bool b = c.traits.qkv_bias;
    int q = node(OpKind::MatMul, {h}, Axis::QHeads, q_width, "attn_q.weight", "attn_q", b ? "attn_q.bias" : "");
    int k = node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_k.weight", "attn_k", b ? "attn_k.bias" : "");
    int v = node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_v.weight", "attn_v", b ? "attn_v.bias" : "");
    if (c.traits.qk_norm) {
      q = node(OpKind::HeadNorm, {q}, Axis::QHeads, q_width, "attn_q_norm.weight", "attn_q_norm");
      k = node(OpKind::HeadNorm, {k}, Axis::KvHeads, kv_width, "attn_k_norm.weight", "attn_k_norm");
    }
    q = node(OpKind::Rope, {q}, Axis::QHeads, q_width, "", "rope_q");
    k = node(OpKind::Rope, {k}, Axis::KvHeads, kv_width, "", "rope_k");
    int a = node(OpKind::Attention, {q, k, v}, Axis::QHeads, q_width, "", "attention");
    int o = node(OpKind::MatMul, {a}, Axis::Embd, d.n_embd, "attn_output.weight", "attn_output");
    x = node(OpKind::Add, {x, o}, Axis::Embd, d.n_embd, "", "attn_residual");
    // MLP: SwiGLU, gate/up column-parallel, down row-parallel.
    h = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "ffn_norm.weight", "ffn_norm");
    int ffn = -1;
    if (d.n_expert == 0) {
      int gate = node(OpKind::MatMul, {h}, Axis::Ffn, d.n_ff, "ffn_gate.weight", "ffn_gate");
      int up = node(OpKind::MatMul, {h}, Axis::Ffn, d.n_ff, "ffn_up.weight", "ffn_up");
      int act = node(OpKind::SwiGlu, {gate, up}, Axis::Ffn, d.n_ff, "", "ffn_swiglu");
      ffn = node(OpKind::MatMul, {act}, Axis::Embd, d.n_embd, "ffn_down.weight", "ffn_down");
    } else {
      // Mixture of experts (llama.cpp's build_moe_ffn): the router picks k experts per token, each
      // runs a SwiGLU FFN on it, and their outputs are summed with the router's weights.
      const int64_t ew = d.n_expert_used * d.n_ff_exp;  // (k, n_ff_exp)
      int logits = node(OpKind::MatMul, {h}, Axis::Router, d.n_expert, "ffn_gate_inp.weight", "ffn_router");
      int routes = node(OpKind::MoeRoute, {logits}, Axis::Routes, 2 * d.n_expert_used, "", "ffn_routes");
      int gate = node(OpKind::ExpertMatMul, {h, routes}, Axis::ExpertFfn, ew, "ffn_gate_exps.weight", "ffn_gate_exps");
      int up = node(OpKind::ExpertMatMul, {h, routes}, Axis::ExpertFfn, ew, "ffn_up_exps.weight", "ffn_up_exps");
      int act = node(OpKind::SwiGlu, {gate, up}, Axis::ExpertFfn, ew, "", "ffn_swiglu_exps");
      ffn = node(OpKind::ExpertMatMulSum, {act, routes}, Axis::Embd, d.n_embd, "ffn_down_exps.weight", "ffn_down_exps");
      if (d.n_ff_shexp > 0) {  // qwen2moe: a dense shared expert, scaled by sigmoid of its own gate
        const int64_t sw = d.n_ff_shexp;
        int sg = node(OpKind::MatMul, {h}, Axis::SharedFfn, sw, "ffn_gate_shexp.weight", "ffn_gate_shexp");
        int su = node(OpKind::MatMul, {h}, Axis::SharedFfn, sw, "ffn_up_shexp.weight", "ffn_up_shexp");
        int sa = node(OpKind::SwiGlu, {sg, su}, Axis::SharedFfn, sw, "", "ffn_swiglu_shexp");
        int sd = node(OpKind::MatMul, {sa}, Axis::Embd, d.n_embd, "ffn_down_shexp.weight", "ffn_down_shexp");
        int gi = node(OpKind::MatMul, {h}, Axis::SharedGate, 1, "ffn_gate_inp_shexp.weight", "ffn_gate_inp_shexp");
        int so = node(OpKind::SigmoidScale, {sd, gi}, Axis::Embd, d.n_embd, "", "ffn_shexp_out");
        ffn = node(OpKind::Add, {ffn, so}, Axis::Embd, d.n_embd, "", "ffn_moe_out");
      }
    }
    x = node(OpKind::Add, {x, ffn}, Axis::Embd, d.n_embd, "", "ffn_residual");
  }
  x = g.add({OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "output_norm.weight", "", -1, "output_norm"});
  const std::string out_w = c.tied_output ? "token_embd.weight" : "output.weight";
  g.output = g.add({OpKind::MatMul, {x}, Axis::Vocab, d.n_vocab, out_w, "", -1, "output"});
  return g;
}

}  // namespace weft::model
