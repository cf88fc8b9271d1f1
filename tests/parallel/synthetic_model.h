// Llama-shaped graphs and weight tables without a model file, for the planner tests: a Shape gives
// the dimensions (and experts), weights() the table a file of that shape would have.
#pragma once

#include "graph/graph.h"
#include "model/llama_graph.h"
#include "model/model_config.h"

namespace weft::parallel::synthetic {

struct Shape {
  int64_t n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab;
  DType type = DType::F32;
  bool qwen3 = false;
  // Mixture of experts (n_expert 0: dense); n_ff_shexp > 0 adds qwen2moe's shared expert.
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

inline model::ModelConfig config(const Shape& s) {
  model::ModelConfig c;
  c.arch = s.qwen3 ? "qwen3" : "llama";
  c.traits.qk_norm = s.qwen3;
  auto& d = c.dims;
  d.n_embd = s.n_embd;
  d.n_layer = s.n_layer;
  d.n_ff = s.n_ff;
  d.n_head = s.n_head;
  d.n_head_kv = s.n_head_kv;
  d.head_dim = s.n_embd / s.n_head;
  d.n_vocab = s.n_vocab;
  d.rope.n_rot = d.head_dim;
  d.n_expert = s.n_expert;
  d.n_expert_used = s.n_expert_used;
  d.n_ff_exp = s.n_ff_exp;
  d.n_ff_shexp = s.n_ff_shexp;
  return c;
}

// Weight table for the graph: every matmul weight (expert stacks too) in `type`, vectors f32.
inline graph::WeightTable weights(const graph::Graph& g, DType type) {
  using graph::OpKind;
  const auto& d = g.dims;
  graph::WeightTable t;
  for (const auto& n : g.nodes) {
    if (n.weight.empty()) continue;
    if (n.op == OpKind::ExpertMatMul) {
      t[n.weight] = {type, d.n_embd, d.n_ff_exp, d.n_expert};
    } else if (n.op == OpKind::ExpertMatMulSum) {
      t[n.weight] = {type, d.n_ff_exp, d.n_embd, d.n_expert};
    } else if (n.op == OpKind::MatMul || n.op == OpKind::Embed) {
      const int64_t in = n.op == OpKind::Embed ? n.width : g.nodes[n.inputs[0]].width;
      const int64_t out = n.op == OpKind::Embed ? d.n_vocab : n.width;
      t[n.weight] = {type, in, out};
    } else {
      t[n.weight] = {DType::F32, n.op == OpKind::HeadNorm ? d.head_dim : n.width, 1};
    }
  }
  return t;
}

}  // namespace weft::parallel::synthetic
