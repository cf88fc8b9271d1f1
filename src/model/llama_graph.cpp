#include "model/llama_graph.h"

#include <fmt/format.h>

#include <cmath>

namespace weft::model {

using graph::Axis;
using graph::Node;
using graph::OpKind;

graph::Graph build_llama_graph(const ModelConfig& c) {
  graph::Graph g;
  g.dims = c.dims;
  const auto& d = c.dims;

  // x: the residual stream (n_embd), token embeddings to start with.
  Node embed{OpKind::Embed, {}, Axis::Embd, d.n_embd, "token_embd.weight", "", -1, "token_embd"};
  if (d.embd_scale > 0) embed.factor = d.embd_scale;  // Gemma: sqrt(n_embd)
  int x = g.add(std::move(embed));
  // Gemma 4 E2B/E4B: every layer's input of n_embd_per_layer values, computed once for all layers:
  // the token's row of per_layer_token_embd times sqrt(width), and a projection of its scaled
  // embedding over 1/sqrt(n_embd) (normed per layer, in the layer).
  const int64_t pl = d.n_embd_per_layer, pl_all = pl * d.n_layer;
  int per_layer_embd = -1, per_layer_proj = -1;
  auto scale = [&](int in, Axis axis, int64_t width, float factor, int layer, std::string label) {
    Node s{OpKind::Scale, {in}, axis, width, "", "", layer, std::move(label)};
    s.factor = factor;
    return g.add(std::move(s));
  };
  if (pl > 0) {
    Node rows{OpKind::Embed, {}, Axis::PerLayer, pl_all, "per_layer_token_embd.weight", "", -1, "per_layer_token_embd"};
    rows.factor = std::sqrt(static_cast<float>(pl));
    per_layer_embd = g.add(std::move(rows));
    per_layer_proj = g.add(
        {OpKind::MatMul, {x}, Axis::PerLayer, pl_all, "per_layer_model_proj.weight", "", -1, "per_layer_model_proj"});
    per_layer_proj = scale(per_layer_proj, Axis::PerLayer, pl_all, 1.f / std::sqrt(static_cast<float>(d.n_embd)), -1,
                           "per_layer_proj_scale");
  }
  for (int l = 0; l < d.n_layer; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    const int64_t q_width = d.n_head * d.head_dim_of(l);            // (n_head, head_dim)
    const int64_t kv_width = d.n_head_kv_of(l) * d.head_dim_of(l);  // (n_head_kv, head_dim)
    auto node = [&](OpKind op, std::vector<int> in, Axis axis, int64_t width, std::string weight, std::string label,
                    std::string bias = "") {
      return g.add({op, std::move(in), axis, width, weight.empty() ? "" : blk + weight, bias.empty() ? "" : blk + bias,
                    l, std::move(label)});
    };
    // Features [row0, row0 + width) of node `in`'s value.
    auto slice = [&](int in, Axis axis, int64_t row0, int64_t width, const char* label) {
      Node n{OpKind::Slice, {in}, axis, width, "", "", l, label};
      n.row0 = row0;
      return g.add(std::move(n));
    };
    // One segment [row0, row0 + width) of a fused tensor of `rows` rows, as its own matmul (or
    // another op reading a row of the tensor per feature: Gated DeltaNet's conv taps).
    auto segment = [&](int in, Axis axis, int64_t width, const std::string& weight, std::string label, int64_t row0,
                       int64_t rows, OpKind op = OpKind::MatMul) {
      Node n{op, {in}, axis, width, blk + weight, "", l, std::move(label)};
      n.row0 = row0;
      n.fused_rows = rows;
      return g.add(std::move(n));
    };
    // The dense FFN: gate and up column-parallel, SwiGLU (Gemma: GELU-gated), down row-parallel.
    const int64_t n_ff = d.n_ff_of(l);
    auto gated_ffn = [&](int in) {
      int gate, up;
      if (c.traits.phi3) {  // ffn_up holds [gate; up]
        gate = segment(in, Axis::Ffn, n_ff, "ffn_up.weight", "ffn_gate", 0, 2 * n_ff);
        up = segment(in, Axis::Ffn, n_ff, "ffn_up.weight", "ffn_up", n_ff, 2 * n_ff);
      } else {
        gate = node(OpKind::MatMul, {in}, Axis::Ffn, n_ff, "ffn_gate.weight", "ffn_gate");
        up = node(OpKind::MatMul, {in}, Axis::Ffn, n_ff, "ffn_up.weight", "ffn_up");
      }
      const bool gelu = c.traits.gemma;
      int act = node(gelu ? OpKind::GeGlu : OpKind::SwiGlu, {gate, up}, Axis::Ffn, n_ff, "",
                     gelu ? "ffn_geglu" : "ffn_swiglu");
      return node(OpKind::MatMul, {act}, Axis::Embd, d.n_embd, "ffn_down.weight", "ffn_down");
    };
    // DeepSeek's multi-head latent attention, absorbed (deepseek2.cpp's MLA branch): the query's
    // unrotated part of each head goes through that head's attn_k_b into the latent space, so the
    // heads attend over one cached row a token, [latent; k_rope], and their latent outputs come
    // back through attn_v_b. Heads split across devices; the latent is computed whole on each.
    auto latent_attention = [&](int h) {
      const int64_t lat = d.kv_lora_rank, rot = d.rope.n_rot, nh = d.n_head;
      int q;
      if (c.q_lora_rank > 0) {
        q = node(OpKind::MatMul, {h}, Axis::Latent, c.q_lora_rank, "attn_q_a.weight", "attn_q_a");
        q = node(OpKind::RmsNorm, {q}, Axis::Latent, c.q_lora_rank, "attn_q_a_norm.weight", "attn_q_a_norm");
        q = node(OpKind::MatMul, {q}, Axis::QHeads, q_width, "attn_q_b.weight", "attn_q_b");
      } else {
        q = node(OpKind::MatMul, {h}, Axis::QHeads, q_width, "attn_q.weight", "attn_q");
      }
      Node rope_q{OpKind::Rope, {q}, Axis::QHeads, q_width, "", "", l, "rope_q"};
      rope_q.row0 = d.head_dim - rot;  // each head's last n_rot features
      q = g.add(std::move(rope_q));
      int kv = node(OpKind::MatMul, {h}, Axis::Latent, lat + rot, "attn_kv_a_mqa.weight", "attn_kv_a_mqa");
      int latent = node(OpKind::RmsNorm, {slice(kv, Axis::Latent, 0, lat, "kv_latent")}, Axis::Latent, lat,
                        "attn_kv_a_norm.weight", "attn_kv_a_norm");
      int k_rope = node(OpKind::Rope, {slice(kv, Axis::Latent, lat, rot, "k_rope")}, Axis::Latent, rot, "", "rope_k");
      int q_latent = node(OpKind::HeadMatMul, {q}, Axis::QHeads, nh * lat, "attn_k_b.weight", "attn_k_b");
      int a =
          node(OpKind::LatentAttention, {q_latent, q, latent, k_rope}, Axis::QHeads, nh * lat, "", "latent_attention");
      a = node(OpKind::HeadMatMul, {a}, Axis::QHeads, nh * d.v_head_dim, "attn_v_b.weight", "attn_v_b");
      return node(OpKind::MatMul, {a}, Axis::Embd, d.n_embd, "attn_output.weight", "attn_output");
    };
    // Gated DeltaNet (qwen35.cpp's and qwen3next.cpp's build_layer_attn_linear): q, k, v through a
    // causal conv and SiLU, the delta rule's recurrence over each value head's state matrix, its
    // output RMS-normed per head and gated by silu(z), then ssm_out. Split by key heads with
    // their value heads: no collective until ssm_out's all-reduce.
    auto linear_attention = [&](int h) {
      const int64_t hd = d.linear_head_dim, kw = d.linear_k_heads * hd, vw = d.linear_v_heads * hd;
      const int64_t rows = 2 * kw + vw, nv = d.linear_v_heads, per_k = nv / d.linear_k_heads;
      // The projections of q, k, v and z: segments of attn_qkv and attn_gate, or slices of each key
      // head's [q; k; its value heads' v; their z] in Qwen3-Next's older ssm_in.
      int q_in, k_in, v_in, z;
      if (c.linear_qkvz) {
        const int64_t head = 2 * hd + 2 * per_k * hd;
        const int qkvz =
            node(OpKind::MatMul, {h}, Axis::LinearKHeads, d.linear_k_heads * head, "ssm_in.weight", "linear_qkvz");
        q_in = slice(qkvz, Axis::LinearKHeads, 0, kw, "linear_q");
        k_in = slice(qkvz, Axis::LinearKHeads, hd, kw, "linear_k");
        v_in = slice(qkvz, Axis::LinearVHeads, 2 * hd, vw, "linear_v");
        z = slice(qkvz, Axis::LinearVHeads, 2 * hd + per_k * hd, vw, "linear_z");
      } else {
        q_in = segment(h, Axis::LinearKHeads, kw, "attn_qkv.weight", "linear_q", 0, rows);
        k_in = segment(h, Axis::LinearKHeads, kw, "attn_qkv.weight", "linear_k", kw, rows);
        v_in = segment(h, Axis::LinearVHeads, vw, "attn_qkv.weight", "linear_v", 2 * kw, rows);
        z = node(OpKind::MatMul, {h}, Axis::LinearVHeads, vw, "attn_gate.weight", "linear_z");
      }
      // Each projection's features' rows of ssm_conv1d ([q; k; v]).
      auto conv = [&](int in, Axis axis, int64_t width, int64_t row0, const char* label) {
        return segment(in, axis, width, "ssm_conv1d.weight", label, row0, rows, OpKind::CausalConv);
      };
      const int q = conv(q_in, Axis::LinearKHeads, kw, 0, "conv_q");
      const int k = conv(k_in, Axis::LinearKHeads, kw, kw, "conv_k");
      const int v = conv(v_in, Axis::LinearVHeads, vw, 2 * kw, "conv_v");
      int beta, alpha;
      if (c.traits.qwen3next) {  // ssm_ba: each key head's value heads' beta, then their alpha
        const int ba = node(OpKind::MatMul, {h}, Axis::LinearKHeads, 2 * nv, "ssm_ba.weight", "ssm_ba");
        beta = slice(ba, Axis::LinearVHeads, 0, nv, "ssm_beta");
        alpha = slice(ba, Axis::LinearVHeads, per_k, nv, "ssm_alpha");
      } else {
        beta = node(OpKind::MatMul, {h}, Axis::LinearVHeads, nv, "ssm_beta.weight", "ssm_beta");
        alpha = node(OpKind::MatMul, {h}, Axis::LinearVHeads, nv, "ssm_alpha.weight", "ssm_alpha");
      }
      int o =
          node(OpKind::DeltaNet, {q, k, v, beta, alpha}, Axis::LinearVHeads, vw, "ssm_a", "delta_net", "ssm_dt.bias");
      o = node(OpKind::HeadNorm, {o}, Axis::LinearVHeads, vw, "ssm_norm.weight", "ssm_norm");
      o = node(OpKind::SwiGlu, {z, o}, Axis::LinearVHeads, vw, "", "linear_gated");
      return node(OpKind::MatMul, {o}, Axis::Embd, d.n_embd, "ssm_out.weight", "ssm_out");
    };
    // Attention: h = norm(x); q, k, v projections (column-parallel); RoPE; attend; project back.
    int h = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "attn_norm.weight", "attn_norm");
    const bool b = c.traits.qkv_bias;
    int q = -1, k = -1, v = -1, o = -1, out_gate = -1;
    const bool own_kv = d.owns_kv(l);  // else attends over an earlier layer's cache (Gemma 4 E2B/E4B)
    if (d.mla()) {
      o = latent_attention(h);
    } else if (d.linear_attention(l)) {
      o = linear_attention(h);
    } else if (c.traits.qwen35) {  // attn_q: each head's query, then its output gate
      const int qg = node(OpKind::MatMul, {h}, Axis::QHeads, 2 * q_width, "attn_q.weight", "attn_q");
      q = slice(qg, Axis::QHeads, 0, q_width, "attn_q_heads");
      out_gate = slice(qg, Axis::QHeads, d.head_dim_of(l), q_width, "attn_gate_heads");
      k = node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_k.weight", "attn_k");
      v = node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_v.weight", "attn_v");
    } else if (c.fused_qkv) {  // Phi-3: [q; k; v] rows of attn_qkv, each cut by heads like its own tensor
      const int64_t rows = q_width + 2 * kv_width;
      q = segment(h, Axis::QHeads, q_width, "attn_qkv.weight", "attn_q", 0, rows);
      k = segment(h, Axis::KvHeads, kv_width, "attn_qkv.weight", "attn_k", q_width, rows);
      v = segment(h, Axis::KvHeads, kv_width, "attn_qkv.weight", "attn_v", q_width + kv_width, rows);
    } else if (!own_kv) {
      q = node(OpKind::MatMul, {h}, Axis::QHeads, q_width, "attn_q.weight", "attn_q");
    } else {
      q = node(OpKind::MatMul, {h}, Axis::QHeads, q_width, "attn_q.weight", "attn_q", b ? "attn_q.bias" : "");
      k = node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_k.weight", "attn_k", b ? "attn_k.bias" : "");
      const bool k_as_v = !c.k_as_v.empty() && c.k_as_v[l];  // Gemma 4: V is K's projection
      v = k_as_v
              ? k
              : node(OpKind::MatMul, {h}, Axis::KvHeads, kv_width, "attn_v.weight", "attn_v", b ? "attn_v.bias" : "");
    }
    const bool oss = c.traits.gpt_oss;
    if (o < 0) {
      if (c.traits.qk_norm) {
        q = node(OpKind::HeadNorm, {q}, Axis::QHeads, q_width, "attn_q_norm.weight", "attn_q_norm");
        if (own_kv) k = node(OpKind::HeadNorm, {k}, Axis::KvHeads, kv_width, "attn_k_norm.weight", "attn_k_norm");
      }
      if (c.traits.gemma4 && own_kv)  // V normed, without a weight
        v = node(OpKind::HeadNorm, {v}, Axis::KvHeads, kv_width, "", "attn_v_norm");
      q = node(OpKind::Rope, {q}, Axis::QHeads, q_width, "", "rope_q");
      if (own_kv) k = node(OpKind::Rope, {k}, Axis::KvHeads, kv_width, "", "rope_k");
      std::vector<int> qkv{q};
      if (own_kv) qkv = {q, k, v};
      int a = node(OpKind::Attention, qkv, Axis::QHeads, q_width, oss ? "attn_sinks.weight" : "", "attention");
      if (out_gate >= 0) a = node(OpKind::SigmoidScale, {a, out_gate}, Axis::QHeads, q_width, "", "attn_gated");
      o = node(OpKind::MatMul, {a}, Axis::Embd, d.n_embd, "attn_output.weight", "attn_output",
               oss ? "attn_output.bias" : "");
    }
    if (c.traits.gemma)
      o = node(OpKind::RmsNorm, {o}, Axis::Embd, d.n_embd, "post_attention_norm.weight", "attn_post_norm");
    x = node(OpKind::Add, {x, o}, Axis::Embd, d.n_embd, "", "attn_residual");
    h = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd,
             oss || c.traits.qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight", "ffn_norm");
    int ffn = -1;
    if (!d.has_experts(l)) {
      ffn = gated_ffn(h);
    } else {
      // Mixture of experts (llama.cpp's build_moe_ffn): the router picks k experts per token, each
      // runs a SwiGLU FFN on it, and their outputs are summed with the router's weights.
      const int64_t ew = d.n_expert_used * d.n_ff_exp;  // (k, n_ff_exp)
      auto bias = [&](const char* name) { return oss ? std::string(name) : std::string(); };
      const bool g4 = c.traits.gemma4;
      int dense = -1, router_in = h;
      // Gemma 4: the dense FFN beside the experts, normed after as the experts are; the experts read
      // x under their own norm, the router x RMS-normed times ffn_gate_inp.scale and 1/sqrt(n_embd).
      if (g4) {
        dense =
            node(OpKind::RmsNorm, {gated_ffn(h)}, Axis::Embd, d.n_embd, "post_ffw_norm_1.weight", "ffn_post_norm_1");
        router_in = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "ffn_gate_inp.scale", "ffn_router_norm");
        router_in = scale(router_in, Axis::Embd, d.n_embd, 1.f / std::sqrt(static_cast<float>(d.n_embd)), l,
                          "ffn_router_scale");
        h = node(OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "pre_ffw_norm_2.weight", "ffn_norm_2");
      }
      int logits = node(OpKind::MatMul, {router_in}, Axis::Router, d.n_expert, "ffn_gate_inp.weight", "ffn_router",
                        bias("ffn_gate_inp.bias"));
      // DeepSeek V3: a selection bias added to the sigmoid scores before the top k (not to the weights)
      int routes = node(OpKind::MoeRoute, {logits}, Axis::Routes, 2 * d.n_expert_used,
                        c.expert_out_scale ? "ffn_down_exps.scale" : "", "ffn_routes",
                        c.expert_selection_bias ? "exp_probs_b.bias" : "");
      int gate, up;
      if (c.fused_gate_up_exps) {  // one stack, each expert's gate rows then its up rows
        auto half = [&](const char* label, int64_t row0) {
          Node n{OpKind::ExpertMatMul, {h, routes}, Axis::ExpertFfn, ew, blk + "ffn_gate_up_exps.weight", "", l, label};
          n.row0 = row0;
          n.fused_rows = 2 * d.n_ff_exp;
          return g.add(std::move(n));
        };
        gate = half("ffn_gate_exps", 0);
        up = half("ffn_up_exps", d.n_ff_exp);
      } else {
        gate = node(OpKind::ExpertMatMul, {h, routes}, Axis::ExpertFfn, ew, "ffn_gate_exps.weight", "ffn_gate_exps",
                    bias("ffn_gate_exps.bias"));
        up = node(OpKind::ExpertMatMul, {h, routes}, Axis::ExpertFfn, ew, "ffn_up_exps.weight", "ffn_up_exps",
                  bias("ffn_up_exps.bias"));
      }
      const OpKind act_op = oss ? OpKind::SwiGluOai : g4 ? OpKind::GeGlu : OpKind::SwiGlu;
      int act = node(act_op, {gate, up}, Axis::ExpertFfn, ew, "",
                     oss  ? "ffn_swiglu_oai_exps"
                     : g4 ? "ffn_geglu_exps"
                          : "ffn_swiglu_exps");
      ffn = node(OpKind::ExpertMatMulSum, {act, routes}, Axis::Embd, d.n_embd, "ffn_down_exps.weight", "ffn_down_exps",
                 bias("ffn_down_exps.bias"));
      if (g4) {
        ffn = node(OpKind::RmsNorm, {ffn}, Axis::Embd, d.n_embd, "post_ffw_norm_2.weight", "ffn_post_norm_2");
        ffn = node(OpKind::Add, {dense, ffn}, Axis::Embd, d.n_embd, "", "ffn_moe_out");
      }
      // A dense shared expert beside the routed ones: qwen2moe's scaled by the sigmoid of its own
      // gate, DeepSeek's ungated.
      if (d.n_ff_shexp > 0) {
        const int64_t sw = d.n_ff_shexp;
        // The gate first: --exact applies its sigmoid to each granule of the down's partial sums.
        const int gi = c.traits.shared_expert ? node(OpKind::MatMul, {h}, Axis::SharedGate, 1,
                                                     "ffn_gate_inp_shexp.weight", "ffn_gate_inp_shexp")
                                              : -1;
        int sg = node(OpKind::MatMul, {h}, Axis::SharedFfn, sw, "ffn_gate_shexp.weight", "ffn_gate_shexp");
        int su = node(OpKind::MatMul, {h}, Axis::SharedFfn, sw, "ffn_up_shexp.weight", "ffn_up_shexp");
        int sa = node(OpKind::SwiGlu, {sg, su}, Axis::SharedFfn, sw, "", "ffn_swiglu_shexp");
        int so = node(OpKind::MatMul, {sa}, Axis::Embd, d.n_embd, "ffn_down_shexp.weight", "ffn_down_shexp");
        if (gi >= 0) so = node(OpKind::SigmoidScale, {so, gi}, Axis::Embd, d.n_embd, "", "ffn_shexp_out");
        ffn = node(OpKind::Add, {ffn, so}, Axis::Embd, d.n_embd, "", "ffn_moe_out");
      }
    }
    if (c.traits.gemma)
      ffn = node(OpKind::RmsNorm, {ffn}, Axis::Embd, d.n_embd, "post_ffw_norm.weight", "ffn_post_norm");
    x = node(OpKind::Add, {x, ffn}, Axis::Embd, d.n_embd, "", "ffn_residual");
    if (pl > 0) {  // this layer's slice of the per-layer inputs, through its own gate and projection
      auto own = [&](int in, const char* label) { return slice(in, Axis::PerLayer, l * pl, pl, label); };
      int proj = g.add({OpKind::RmsNorm,
                        {own(per_layer_proj, "per_layer_proj")},
                        Axis::PerLayer,
                        pl,
                        "per_layer_proj_norm.weight",
                        "",
                        l,
                        "per_layer_proj_norm"});  // one norm for every layer
      int in =
          node(OpKind::Add, {proj, own(per_layer_embd, "per_layer_embd")}, Axis::PerLayer, pl, "", "per_layer_input");
      in = scale(in, Axis::PerLayer, pl, 1.f / std::sqrt(2.f), l, "per_layer_input_scale");
      int gate = node(OpKind::MatMul, {x}, Axis::PerLayer, pl, "inp_gate.weight", "per_layer_gate");
      int act = node(OpKind::GeGlu, {gate, in}, Axis::PerLayer, pl, "", "per_layer_geglu");
      int out = node(OpKind::MatMul, {act}, Axis::Embd, d.n_embd, "proj.weight", "per_layer_out");
      out = node(OpKind::RmsNorm, {out}, Axis::Embd, d.n_embd, "post_norm.weight", "per_layer_post_norm");
      x = node(OpKind::Add, {x, out}, Axis::Embd, d.n_embd, "", "per_layer_residual");
    }
    if (!c.out_scale.empty() && c.out_scale[l])  // Gemma 4
      x = node(OpKind::Scale, {x}, Axis::Embd, d.n_embd, "layer_output_scale.weight", "layer_out_scale");
  }
  x = g.add({OpKind::RmsNorm, {x}, Axis::Embd, d.n_embd, "output_norm.weight", "", -1, "output_norm"});
  const std::string out_w = c.tied_output ? "token_embd.weight" : "output.weight";
  g.output =
      g.add({OpKind::MatMul, {x}, Axis::Vocab, d.n_vocab, out_w, c.output_bias ? "output.bias" : "", -1, "output"});
  return g;
}

}  // namespace weft::model
