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
    int gate = node(OpKind::MatMul, {h}, Axis::Ffn, d.n_ff, "ffn_gate.weight", "ffn_gate");
    int up = node(OpKind::MatMul, {h}, Axis::Ffn, d.n_ff, "ffn_up.weight", "ffn_up");
    int act = node(OpKind::SwiGlu, {gate, up}, Axis::Ffn, d.n_ff, "", "ffn_swiglu");
    int down = node(OpKind::MatMul, {act}, Axis::Embd, d.n_embd, "ffn_down.weight", "ffn_down");
    x = node(OpKind::Add, {x, down}, Axis::Embd, d.n_embd, "", "ffn_residual");
  }
  x = g.add({OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "output_norm.weight", "", -1, "output_norm"});
  const std::string out_w = c.tied_output ? "token_embd.weight" : "output.weight";
  g.output = g.add({OpKind::MatMul, {x}, Axis::Vocab, d.n_vocab, out_w, "", -1, "output"});
  return g;
}

}  // namespace weft::model
