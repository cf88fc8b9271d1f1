// The op graph a model builds: one token step of a decoder, activations [n_tokens, width] f32.
// The graph names no devices. The split planner (src/parallel) cuts it across devices by reading each
// activation's Axis — what its features mean — never tensor names.
#pragma once

#include "core/dtype.h"
#include "core/rope_params.h"

#include <algorithm>
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
  // Mixture of experts (qwen2moe, qwen3moe, Mixtral):
  Router,      // n_expert: router logits (small: kept whole on every device)
  Routes,      // 2 * n_expert_used: the experts a token goes to (ids as floats), then their weights
  ExpertFfn,   // n_expert_used * n_ff_exp: the hidden width of each selected expert, slot after slot
  SharedFfn,   // n_ff_shexp: the shared expert's hidden width (qwen2moe)
  SharedGate,  // 1: the shared expert's gate logit (qwen2moe)
  // Gemma 4 E2B/E4B's per-layer inputs (n_layer * n_embd_per_layer, or one layer's slice of them)
  // and each layer's gate over its slice: small, kept whole on every device
  PerLayer,
  // DeepSeek's multi-head latent attention: the compressed query and the key/value latent with its
  // shared RoPE key (a few hundred values a token), kept whole on every device
  Latent,
  // Gated DeltaNet, the linear attention of Qwen 3.5 (Dims::linear_attention): its key heads (the
  // features of q and k, linear_k_heads of linear_head_dim), and its value heads (v, the output
  // gate z, the output; beta and the decay one value a head). Value head h reads key head
  // Dims::linear_key_head(h): in Qwen 3.5's tiled order a device holding some key heads holds
  // their value heads as a run in each block of linear_k_heads value heads; in Qwen3-Next's grouped
  // order as one run.
  LinearKHeads,
  LinearVHeads,
  Count
};
std::string_view axis_name(Axis a);

enum class OpKind : uint8_t {
  Embed,      // token ids -> rows of `weight` times `factor`               out Embd (PerLayer)
  RmsNorm,    // x -> x / rms(x) * weight                                 same axis
  MatMul,     // x[in] -> W x (+ bias); W is [width rows, in cols]
  HeadNorm,   // per-head RMSNorm with weight [head_dim] (qwen3 q/k norm), or none: all ones (Gemma 4's v)
  Rope,       // rotate each head by its token's position
  Attention,  // inputs q, k, v: causal attention over this layer's KV cache
  SwiGlu,     // inputs gate, up: silu(gate) * up
  Add,        // inputs a, b: a + b (the residual stream)
  // Mixture of experts. A token's k selected experts fill k slots (Axis::Routes, ExpertFfn).
  // router logits -> top-k experts by softmax and their weights, each times its expert's value of
  // `weight` where there is one (Gemma 4's per-expert output scale)                  out Routes
  MoeRoute,
  ExpertMatMul,     // inputs x, routes: slot j of token t = W[e_tj] x_t (gate, up)    out ExpertFfn
  ExpertMatMulSum,  // inputs x, routes: sum_j w_tj W[e_tj] x_tj over the slots (down)  out Embd
  // inputs x, g: x * sigmoid(g), g of width 1 (a token's scale: qwen2moe's shared expert gate) or
  // of x's (Qwen 3.5's attention output gate, element by element)
  SigmoidScale,
  GeGlu,  // inputs gate, up: gelu(gate) * up (Gemma), GELU's tanh form as ggml's
  // inputs gate, up: g * sigmoid(alpha g) * (u + 1) with g = min(gate, limit), u = clamp(up, +-limit)
  // (gpt-oss's experts; Dims::swiglu_alpha / swiglu_limit)
  SwiGluOai,
  // x times `weight`, a tensor of one value (Gemma 4's layer_output_scale), or where there is no
  // weight times the constant `factor` (Gemma 4's router input, 1/sqrt(n_embd))      same axis
  Scale,
  // x -> features [row0, row0 + width) of x (one layer's slice of the per-layer inputs); on a
  // heads axis, of each head (Qwen 3.5's query heads and their output gates, interleaved)  same axis
  Slice,
  // x of heads -> per head h: W[h] times the first `cols` features of x's head h (W a stack of
  // n_head matrices, one per head: DeepSeek's attn_k_b and attn_v_b)     same axis, heads of `rows`
  HeadMatMul,
  // Multi-head latent attention in its absorbed form (DeepSeek): inputs q_latent (per head
  // kv_lora_rank: the non-rotated part of q times attn_k_b), q (per head, its last n_rot features
  // rotated), kv latent (kv_lora_rank, normed), k_rope (n_rot, rotated). One cache row per token,
  // [latent; k_rope], which every head attends over; out per head: the softmax-weighted latents.
  LatentAttention,
  // x -> silu(causal depthwise conv1d of each feature over its last Dims::linear_conv_kernel
  // values): `weight` holds a row of the kernel's taps per feature (ssm_conv1d's rows row0..);
  // the kernel - 1 values before a step are the sequence's state                      same axis
  CausalConv,
  // Gated DeltaNet's recurrence (delta-net-base.cpp): inputs q, k (key heads), v, beta, alpha
  // (value heads); `weight` ssm_a, `bias` ssm_dt, one value a value head. Per value head, with
  // its key head's q and k L2-normed: g = softplus(alpha + dt) * a, S = S exp(g) +
  // sigmoid(beta) (v - S exp(g) k) k^T, out = S q / sqrt(head_dim); S, head_dim x head_dim, is the
  // sequence's state                                                     out LinearVHeads
  DeltaNet,
  Count
};
std::string_view op_name(OpKind op);

struct Node {
  OpKind op;
  std::vector<int> inputs;  // ids of earlier nodes (topological order); Embed has none
  Axis axis;                // meaning of this node's output features
  int64_t width = 0;        // features per token of the output
  // Tensor read by Embed, RmsNorm, MatMul, HeadNorm, Expert*, Scale, and by Attention its sinks (gpt-oss: a
  // learned logit per q head in each softmax's denominator), optional; else empty.
  std::string weight;
  // Optional: MatMul's bias [width]; an Expert*'s biases [width per slot, n_expert], one per expert.
  std::string bias;
  int layer = -1;     // block index; -1 outside the blocks
  std::string label;  // for plans and profiles: "attn_q", "ffn_down"
  // A MatMul reading one segment of a fused tensor (Phi-3's attn_qkv, its gate+up ffn_up): its
  // rows (and bias values) start at row0 of the tensor, which has fused_rows rows in all. An
  // ExpertMatMul's segment is the same rows of every expert's matrix (ffn_gate_up_exps). A Slice
  // starts at its input's feature row0.
  int64_t row0 = 0, fused_rows = 0;
  float factor = 1.f;  // Scale without a weight; Embed: its rows' scale (Gemma's)
};

// Shape facts the ops and the planner need beyond single nodes.
struct Dims {
  int64_t n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0, n_layer = 0;
  float norm_eps = 1e-5f;
  RopeParams rope;
  // Mixture of experts (n_expert == 0: a dense model).
  int64_t n_expert = 0, n_expert_used = 0;  // experts per layer, experts per token (k)
  int64_t n_ff_exp = 0;                     // hidden width of one expert
  int64_t n_ff_shexp = 0;                   // hidden width of the shared expert (0: none)
  bool expert_weights_norm = false;         // the k weights are renormalised to sum to 1
  // How the router's logits become the k weights: a softmax over all n_expert, the top k taken
  // (llama.cpp's SOFTMAX), or the top k logits taken, then a softmax over those k (SOFTMAX_WEIGHT, gpt-oss).
  // Sigmoid (DeepSeek V3): each logit's sigmoid, the top k of those plus the router's selection bias
  // (MoeRoute's bias), weighted by the unbiased sigmoids.
  enum class Gating : uint8_t { Softmax, SoftmaxSelected, Sigmoid };
  Gating expert_gating = Gating::Softmax;
  float expert_weights_scale = 0.f;  // the k weights times this (DeepSeek's routed scaling); 0: 1
  // DeepSeek: experts in n_expert_groups groups; a token's experts come from the n_group_used
  // groups whose two best scores sum highest (0: no groups).
  int64_t n_expert_groups = 0, n_group_used = 0;
  int64_t n_layer_dense_lead = 0;  // DeepSeek: the first layers' FFN is dense (n_ff), the rest experts
  bool has_experts(int layer) const { return n_expert > 0 && layer >= n_layer_dense_lead; }
  // Multi-head latent attention (DeepSeek): head_dim is a query head's width (its non-rotated
  // features, then rope.n_rot rotated ones), each layer caches kv_lora_rank + n_rot values a
  // token, and a head's output is v_head_dim wide. 0: ordinary attention.
  int64_t kv_lora_rank = 0, v_head_dim = 0;
  bool mla() const { return kv_lora_rank > 0; }
  // Width of an attention head's output, the input features per head of attn_output.
  int64_t out_head_dim(int layer) const { return mla() ? v_head_dim : head_dim_of(layer); }
  float swiglu_alpha = 1.702f, swiglu_limit = 7.f;  // OpKind::SwiGluOai's constants (llama.cpp's)
  // Gemma: token embeddings times embd_scale (sqrt(n_embd)); 0 or 1: none.
  float embd_scale = 0.f;
  // Attention scores scale; 0: 1/sqrt(head_dim) (Gemma 3 27B scales by 1/sqrt(n_embd/n_head)).
  float attn_scale = 0.f;
  // Sliding-window attention: layers with swa_layers[l] != 0 see the last n_swa positions only
  // (a query at p sees keys p - n_swa + 1 .. p) and rotate with rope_swa; the others with rope.
  int64_t n_swa = 0;
  std::vector<uint8_t> swa_layers;
  RopeParams rope_swa;
  float logit_softcap = 0.f;  // > 0: logits = softcap * tanh(logits / softcap) (Gemma)
  // Per-layer attention shapes where layers differ (Gemma 4: its global layers' heads are wider
  // and fewer of them hold K and V); empty: every layer has n_head_kv heads of head_dim. Every
  // layer has n_head query heads.
  struct LayerHeads {
    int64_t n_head_kv = 0, head_dim = 0;
    bool operator==(const LayerHeads&) const = default;
  };
  std::vector<LayerHeads> layer_heads;
  // Per-layer FFN widths where layers differ (Gemma 4 E2B's wider FFN in its KV-sharing layers);
  // empty: every layer's is n_ff.
  std::vector<int64_t> layer_ff;
  int64_t n_ff_of(int layer) const {
    return layer >= 0 && layer < static_cast<int>(layer_ff.size()) ? layer_ff[layer] : n_ff;
  }
  // The layer whose KV cache each layer's attention reads (Gemma 4 E2B/E4B's last layers compute
  // no K or V of their own and attend over an earlier layer's); empty: every layer its own.
  std::vector<int32_t> kv_source;
  int kv_layer_of(int layer) const {
    return layer >= 0 && layer < static_cast<int>(kv_source.size()) ? kv_source[layer] : layer;
  }
  bool owns_kv(int layer) const { return kv_layer_of(layer) == layer; }
  int64_t n_embd_per_layer = 0;  // Gemma 4 E2B/E4B: per-layer input width (0: none)
  // Gated DeltaNet (Qwen 3.5): every layer but each full_attention_interval-th is linear
  // attention of linear_k_heads key heads and linear_v_heads value heads (a multiple of them), all
  // linear_head_dim wide, after a causal conv of linear_conv_kernel taps. 0: none.
  int64_t full_attention_interval = 0, linear_k_heads = 0, linear_v_heads = 0, linear_head_dim = 0,
          linear_conv_kernel = 0;
  // Qwen3-Next: value head h reads key head h / (linear_v_heads / linear_k_heads) (grouped); Qwen
  // 3.5: h % linear_k_heads (tiled). Either holds for a device's share of the heads too.
  bool linear_v_grouped = false;
  int64_t linear_key_head(int64_t v_head, int64_t k_heads) const {
    return linear_v_grouped ? v_head / (linear_v_heads / linear_k_heads) : v_head % k_heads;
  }
  bool linear_attention(int layer) const {
    return full_attention_interval > 0 && (layer + 1) % full_attention_interval != 0;
  }
  bool recurrent() const { return full_attention_interval > 1; }  // some layer holds a recurrent state
  int64_t head_dim_of(int layer) const { return heads_of(layer).head_dim; }
  int64_t n_head_kv_of(int layer) const { return heads_of(layer).n_head_kv; }
  int64_t group_of(int layer) const { return n_head / n_head_kv_of(layer); }
  int64_t group() const { return n_head / n_head_kv; }  // q heads per kv head (GQA)
  LayerHeads heads_of(int layer) const {
    return layer >= 0 && layer < static_cast<int>(layer_heads.size()) ? layer_heads[layer]
                                                                      : LayerHeads{n_head_kv, head_dim};
  }
  bool is_swa(int layer) const {
    return n_swa > 0 && layer >= 0 && layer < static_cast<int>(swa_layers.size()) && swa_layers[layer] != 0;
  }
  const RopeParams& rope_of(int layer) const { return is_swa(layer) ? rope_swa : rope; }
  // Keys a query at `pos` sees start here: 0, or the window's first position.
  int64_t first_key(int layer, int64_t pos) const { return is_swa(layer) ? std::max<int64_t>(0, pos - n_swa + 1) : 0; }
  float attention_scale(int layer) const;
};

// Heads of a heads axis in `layer` (q, kv, linear key or value heads); 0 for other axes.
int64_t heads_of_axis(const Dims& d, Axis a, int layer);
// Features per head of a node on a heads axis: its width over the axis' heads in its layer (the
// heads of one layer's q, k and attention output may differ in width: DeepSeek's MLA); the
// node's width on other axes.
int64_t head_width(const Dims& d, const Node& n);

struct Graph {
  Dims dims;
  std::vector<Node> nodes;
  int output = -1;  // the logits node (Axis::Vocab)

  int add(Node n);                 // appends, checks inputs precede it, returns the id
  int64_t width_of(Axis a) const;  // full width of an axis
};

// Weight facts the planner needs (type for block alignment, shape to check the graph against).
// A stacked tensor (experts' matrices, ggml [cols, rows, n_mats]) has n_mats > 1.
struct WeightInfo {
  DType type = DType::F32;
  int64_t cols = 0, rows = 0;  // ggml ne0, ne1
  int64_t mats = 1;            // ggml ne2 (x ne3): matrices stacked
};

// Facts about each weight tensor a graph reads, by tensor name: the planner's second input, which a
// model fills from its file (model::weight_table).
using WeightTable = std::map<std::string, WeightInfo>;

}  // namespace weft::graph
