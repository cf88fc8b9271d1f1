#include "model/model_config.h"

#include "core/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <variant>

namespace weft::model {
namespace {

ArchTraits traits_of(const std::string& arch) {
  if (arch == "llama") return {.expert_weights_norm = true};  // Mixtral when it has experts
  if (arch == "qwen2") return {.qkv_bias = true, .rope_neox = true};
  if (arch == "qwen3") return {.qk_norm = true, .rope_neox = true};
  if (arch == "qwen2moe") return {.qkv_bias = true, .rope_neox = true, .moe = true, .shared_expert = true};
  if (arch == "qwen3moe") return {.qk_norm = true, .rope_neox = true, .moe = true, .expert_weights_norm = true};
  if (arch == "gemma3") return {.qk_norm = true, .rope_neox = true, .gemma = true};
  if (arch == "gemma4")
    return {.qk_norm = true, .rope_neox = true, .expert_weights_norm = true, .gemma = true, .gemma4 = true};
  if (arch == "phi3") return {.rope_neox = true, .phi3 = true};
  if (arch == "gpt-oss") return {.qkv_bias = true, .rope_neox = true, .moe = true, .gpt_oss = true};
  if (arch == "deepseek2") return {.moe = true, .deepseek = true};
  if (arch == "qwen35") return {.qk_norm = true, .rope_neox = true, .qwen35 = true};
  if (arch == "qwen35moe" || arch == "qwen3next")
    return {.qk_norm = true,
            .rope_neox = true,
            .moe = true,
            .shared_expert = true,
            .expert_weights_norm = true,
            .qwen35 = true,
            .qwen3next = arch == "qwen3next"};
  fail("model",
       "architecture '{}' is not supported (supported: llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma3, gemma4, phi3, "
       "gpt-oss, deepseek2, qwen35, qwen35moe, qwen3next)",
       arch);
}

int64_t positive(const gguf::File& f, const std::string& key, int64_t v, int64_t max) {
  if (v <= 0 || v > max) fail("model", "{}: {} is out of range (1..{})", key, v, max);
  return v;
}

// A count llama.cpp reads with get_key_or_arr: one value, or one per layer (Gemma 4's head counts
// and widths). Where weft's layers share one, an array must repeat it; `per_layer`: the first is
// returned, the caller reads the rest.
std::optional<int64_t> per_model_int(const gguf::File& f, const std::string& key, bool per_layer = false) {
  const gguf::Value* v = f.find(key);
  if (!v || !v->is_array()) return f.get_int_opt(key);
  const std::vector<int64_t> xs = f.get_int_array(key);
  if (xs.empty()) fail("model", "{} is an empty array", key);
  if (!per_layer && std::any_of(xs.begin(), xs.end(), [&](int64_t x) { return x != xs[0]; }))
    fail("model", "{} differs between layers ({}): per-layer values are not supported yet", key, fmt::join(xs, ", "));
  return xs[0];
}

// llama.cpp's LLAMA_MAX_EXPERTS.
constexpr int64_t kMaxExperts = 512;

void expect_shape(const gguf::File& f, const std::string& name, std::vector<int64_t> want, const char* what) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) fail("model", "{} tensor '{}' is missing", what, name);
  while (want.size() > 1 && want.back() == 1 && t->shape.size() < want.size()) want.pop_back();
  if (t->shape != want)
    fail("model", "{} tensor '{}' is [{}], the hyper-parameters need [{}]", what, name, fmt::join(t->shape, ", "),
         fmt::join(want, ", "));
}

// DeepSeek's experts beside their dense first layers: the shared experts' width, how the router's
// logits become weights (softmax by default, as llama.cpp reads V2 files without the key; sigmoid
// scores for V3), the weights' renormalisation and scale, and the expert groups.
void read_deepseek_experts(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  d.n_layer_dense_lead = f.get_int_opt(p + "leading_dense_block_count").value_or(0);
  if (d.n_layer_dense_lead < 0 || d.n_layer_dense_lead >= d.n_layer)
    fail("model", "{}leading_dense_block_count {} is out of range (0..{})", p, d.n_layer_dense_lead, d.n_layer - 1);
  for (int64_t l = 0; l < d.n_layer_dense_lead; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "ffn_gate.weight", {d.n_embd, d.n_ff}, "dense FFN");
    expect_shape(f, b + "ffn_up.weight", {d.n_embd, d.n_ff}, "dense FFN");
    expect_shape(f, b + "ffn_down.weight", {d.n_ff, d.n_embd}, "dense FFN");
  }
  const int64_t shared = f.get_int_opt(p + "expert_shared_count").value_or(0);
  if (shared < 0 || shared > 64) fail("model", "{}expert_shared_count {} is out of range (0..64)", p, shared);
  d.n_ff_shexp = shared * d.n_ff_exp;
  d.expert_weights_norm = f.get_bool_opt(p + "expert_weights_norm").value_or(false);
  d.expert_weights_scale = static_cast<float>(f.get_float_opt(p + "expert_weights_scale").value_or(0.0));
  if (!(d.expert_weights_scale >= 0 && d.expert_weights_scale < 1e6))
    fail("model", "{}expert_weights_scale {} is out of range", p, d.expert_weights_scale);
  const int64_t gating = f.get_int_opt(p + "expert_gating_func").value_or(0);
  if (gating < 0 || gating > 2)
    fail("model", "{}expert_gating_func {} is not supported (1 softmax, 2 sigmoid)", p, gating);
  // 0, not written (V2 files): softmax
  d.expert_gating = gating == 2 ? graph::Dims::Gating::Sigmoid : graph::Dims::Gating::Softmax;
  d.n_expert_groups = f.get_int_opt(p + "expert_group_count").value_or(0);
  d.n_group_used = f.get_int_opt(p + "expert_group_used_count").value_or(0);
  if (d.n_expert_groups > 1) {  // llama.cpp's checks
    if (d.n_expert_groups >= d.n_expert || d.n_expert_groups > 64 || d.n_expert % d.n_expert_groups != 0)
      fail("model", "{}expert_group_count {} does not divide expert_count {}", p, d.n_expert_groups, d.n_expert);
    if (d.n_group_used < 1 || d.n_group_used >= d.n_expert_groups)
      fail("model", "{}expert_group_used_count {} is out of range (1..{})", p, d.n_group_used, d.n_expert_groups - 1);
    if (d.n_group_used * (d.n_expert / d.n_expert_groups) < d.n_expert_used)
      fail("model", "{} groups of {} experts hold fewer than the {} experts a token uses", d.n_group_used,
           d.n_expert / d.n_expert_groups, d.n_expert_used);
  } else {
    d.n_expert_groups = d.n_group_used = 0;
  }
}

// Expert counts and widths (llama.cpp's keys and defaults), then every layer's router and expert
// tensors against them, so a malformed file fails here with its key or tensor named.
void read_experts(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  d.n_expert = f.get_int_opt(p + "expert_count").value_or(0);
  d.n_expert_used = f.get_int_opt(p + "expert_used_count").value_or(0);
  if (d.n_expert == 0) {
    if (c.traits.moe) fail("model", "{}expert_count is missing or 0: {} is a mixture of experts", p, c.arch);
    if (d.n_expert_used != 0) fail("model", "{}expert_used_count is {} without experts", p, d.n_expert_used);
    if (f.find_tensor("blk.0.ffn_gate_inp.weight"))
      fail("model", "blk.0.ffn_gate_inp.weight is a router, but {}expert_count is missing or 0", p);
    return;
  }
  c.traits.moe = true;
  if (d.n_expert < 0 || d.n_expert > kMaxExperts)
    fail("model", "{}expert_count {} is out of range (1..{})", p, d.n_expert, kMaxExperts);
  if (d.n_expert_used < 1 || d.n_expert_used > d.n_expert)
    fail("model", "{}expert_used_count {} is out of range: must be 1..expert_count ({})", p, d.n_expert_used,
         d.n_expert);
  d.expert_weights_norm = c.traits.expert_weights_norm;
  // Mixtral's experts are feed_forward_length wide; the qwen MoEs name their own width, else
  // feed_forward_length / expert_used_count (llama.cpp's fallback).
  const int64_t def = c.arch == "llama" ? d.n_ff : d.n_ff / d.n_expert_used;
  d.n_ff_exp = f.get_int_opt(p + "expert_feed_forward_length").value_or(def);
  if (d.n_ff_exp <= 0 || d.n_ff_exp > (int64_t{1} << 20))
    fail("model", "{}expert_feed_forward_length {} is out of range", p, d.n_ff_exp);
  if (c.traits.shared_expert) {
    d.n_ff_shexp = f.get_int_opt(p + "expert_shared_feed_forward_length").value_or(d.n_ff);
    if (d.n_ff_shexp <= 0 || d.n_ff_shexp > (int64_t{1} << 20))
      fail("model", "{}expert_shared_feed_forward_length {} is out of range", p, d.n_ff_shexp);
  }
  if (c.traits.deepseek) read_deepseek_experts(f, p, c);
  const std::string first = fmt::format("blk.{}.", d.n_layer_dense_lead);
  c.fused_gate_up_exps = f.find_tensor(first + "ffn_gate_up_exps.weight") != nullptr;
  c.expert_out_scale = f.find_tensor(first + "ffn_down_exps.scale") != nullptr;
  c.expert_selection_bias = c.traits.deepseek && f.find_tensor(first + "exp_probs_b.bias") != nullptr;
  for (int64_t l = d.n_layer_dense_lead; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "ffn_gate_inp.weight", {d.n_embd, d.n_expert}, "router");
    if (c.fused_gate_up_exps) {
      expect_shape(f, b + "ffn_gate_up_exps.weight", {d.n_embd, 2 * d.n_ff_exp, d.n_expert}, "fused gate/up expert");
    } else {
      expect_shape(f, b + "ffn_gate_exps.weight", {d.n_embd, d.n_ff_exp, d.n_expert}, "expert");
      expect_shape(f, b + "ffn_up_exps.weight", {d.n_embd, d.n_ff_exp, d.n_expert}, "expert");
    }
    expect_shape(f, b + "ffn_down_exps.weight", {d.n_ff_exp, d.n_embd, d.n_expert}, "expert");
    if (c.expert_out_scale) expect_shape(f, b + "ffn_down_exps.scale", {d.n_expert}, "per-expert output scale");
    for (const char* s : {"ffn_gate_exps.scale", "ffn_up_exps.scale", "ffn_gate_up_exps.scale"})
      if (f.find_tensor(b + s)) fail("model", "{}{}: scales on the experts' inputs are not supported yet", b, s);
    if (c.traits.gemma4) {  // the dense FFN beside the experts, the branches' norms, the router's input scale
      expect_shape(f, b + "ffn_gate_inp.scale", {d.n_embd}, "router input scale");
      for (const char* s : {"pre_ffw_norm_2.weight", "post_ffw_norm_1.weight", "post_ffw_norm_2.weight"})
        expect_shape(f, b + s, {d.n_embd}, "expert branch norm");
      const int64_t ff = d.n_ff_of(static_cast<int>(l));
      expect_shape(f, b + "ffn_gate.weight", {d.n_embd, ff}, "dense FFN");
      expect_shape(f, b + "ffn_up.weight", {d.n_embd, ff}, "dense FFN");
      expect_shape(f, b + "ffn_down.weight", {ff, d.n_embd}, "dense FFN");
    }
    if (c.expert_selection_bias) expect_shape(f, b + "exp_probs_b.bias", {d.n_expert}, "expert selection bias");
    if (d.n_ff_shexp > 0 && !c.traits.shared_expert) {  // DeepSeek's: ungated
      expect_shape(f, b + "ffn_gate_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
      expect_shape(f, b + "ffn_up_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
      expect_shape(f, b + "ffn_down_shexp.weight", {d.n_ff_shexp, d.n_embd}, "shared expert");
    }
    if (!c.traits.shared_expert) continue;
    expect_shape(f, b + "ffn_gate_inp_shexp.weight", {d.n_embd}, "shared expert gate");
    expect_shape(f, b + "ffn_gate_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
    expect_shape(f, b + "ffn_up_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
    expect_shape(f, b + "ffn_down_shexp.weight", {d.n_ff_shexp, d.n_embd}, "shared expert");
  }
}

// A per-model f32 vector tensor of n values, or empty when the file has none.
std::vector<float> f32_vector(const gguf::File& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return {};
  if (t->type != DType::F32 || t->n_elements() != n) fail("model", "{} must be f32[{}]", name, n);
  std::vector<float> v(n);
  std::memcpy(v.data(), t->data, t->n_bytes);
  return v;
}

void read_sliding_window(const gguf::File& f, const std::string& p, int64_t default_pattern, RopeParams local,
                         ModelConfig& c);
void read_gemma4(const gguf::File& f, const std::string& p, RopeParams local, ModelConfig& c);

// Gemma 4 E2B and E4B (llama.cpp's gemma4-iswa graph): feed_forward_length one value per layer
// (the KV-sharing layers' twice as wide), the last shared_kv_layers layers attending over the
// cache of the last layer of their kind (sliding-window or global) before them, and each
// layer's input of embedding_length_per_layer_input values from the token's own embedding row and
// a projection of its scaled embedding.
void read_gemma4_small(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  const std::string ff_key = p + "feed_forward_length";
  if (const gguf::Value* v = f.find(ff_key); v && v->is_array()) {
    std::vector<int64_t> ff = f.get_int_array(ff_key);
    if (static_cast<int64_t>(ff.size()) != d.n_layer)
      fail("model", "{} has {} values for {} layers", ff_key, ff.size(), d.n_layer);
    for (int64_t x : ff) positive(f, ff_key, x, int64_t{1} << 20);
    if (std::any_of(ff.begin(), ff.end(), [&](int64_t x) { return x != ff[0]; })) d.layer_ff = std::move(ff);
  }
  const int64_t shared = f.get_int_opt(p + "attention.shared_kv_layers").value_or(0);
  if (shared < 0 || shared >= d.n_layer - 1)
    fail("model", "{}attention.shared_kv_layers {} is out of range (0..{})", p, shared, d.n_layer - 2);
  if (shared > 0) {
    const int first = static_cast<int>(d.n_layer - shared);
    d.kv_source.resize(d.n_layer);
    for (int l = 0; l < d.n_layer; ++l) {
      const int src = l < first ? l : first - (d.is_swa(l) ? 2 : 1);  // llama.cpp's layer_reuse_cb
      if (src < 0 || d.is_swa(src) != d.is_swa(l) || d.heads_of(src) != d.heads_of(l))
        fail("model", "layer {} shares the KV cache of layer {}, which is not a layer of its kind and heads", l, src);
      d.kv_source[l] = src;
    }
  }
  d.n_embd_per_layer = f.get_int_opt(p + "embedding_length_per_layer_input").value_or(0);
  if (d.n_embd_per_layer == 0) return;
  const int64_t pl = positive(f, p + "embedding_length_per_layer_input", d.n_embd_per_layer, 1 << 16);
  expect_shape(f, "per_layer_token_embd.weight", {pl * d.n_layer, d.n_vocab}, "per-layer token embedding");
  expect_shape(f, "per_layer_model_proj.weight", {d.n_embd, pl * d.n_layer}, "per-layer input projection");
  expect_shape(f, "per_layer_proj_norm.weight", {pl}, "per-layer input norm");
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "inp_gate.weight", {d.n_embd, pl}, "per-layer input gate");
    expect_shape(f, b + "proj.weight", {pl, d.n_embd}, "per-layer input projection");
    expect_shape(f, b + "post_norm.weight", {d.n_embd}, "per-layer input norm");
  }
}

// Gemma 4's heads per layer: key_length wide on the global layers, key_length_swa on the
// sliding-window ones, and head_count_kv one value or one per layer. The dims' own (n_head_kv,
// head_dim) become the first global layer's; layer_heads lists every layer's where any differs.
void read_gemma4_heads(const gguf::File& f, const std::string& p, int64_t head_dim_swa, graph::Dims& d) {
  const std::string kv_key = p + "attention.head_count_kv";
  std::vector<int64_t> kv(d.n_layer, d.n_head_kv);
  if (const gguf::Value* v = f.find(kv_key); v && v->is_array()) {
    kv = f.get_int_array(kv_key);
    if (static_cast<int64_t>(kv.size()) != d.n_layer)
      fail("model", "{} has {} values for {} layers", kv_key, kv.size(), d.n_layer);
  }
  std::vector<graph::Dims::LayerHeads> heads(d.n_layer);
  for (int l = 0; l < d.n_layer; ++l) {
    if (kv[l] <= 0 || kv[l] > d.n_head || d.n_head % kv[l] != 0)
      fail("model", "{} {} (layer {}) does not divide head_count {}", kv_key, kv[l], l, d.n_head);
    heads[l] = {kv[l], d.is_swa(l) ? head_dim_swa : d.head_dim};
  }
  for (int l = 0; l < d.n_layer; ++l)
    if (!d.is_swa(l)) {
      d.n_head_kv = heads[l].n_head_kv;
      break;
    }
  const graph::Dims::LayerHeads base{d.n_head_kv, d.head_dim};
  if (std::any_of(heads.begin(), heads.end(), [&](const auto& h) { return h != base; })) d.layer_heads = heads;
}

// Gemma 3's sliding-window layers (llama.cpp's set_swa_pattern: of every `pattern` layers the
// last is global), their RoPE base (rope.freq_base_swa, 10000 by default) and unscaled positions;
// the embedding scale, and the attention scale of the 27B (62 layers: 1/sqrt(n_embd / n_head)).
void read_gemma(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  d.embd_scale = std::sqrt(static_cast<float>(d.n_embd));
  if (d.n_layer == 62 && !c.traits.gemma4) d.attn_scale = 1.f / std::sqrt(static_cast<float>(d.n_embd / d.n_head));
  d.logit_softcap = static_cast<float>(f.get_float_opt(p + "final_logit_softcapping").value_or(0.0));
  if (!(d.logit_softcap >= 0 && d.logit_softcap < 1e6))
    fail("model", "final_logit_softcapping {} is out of range", d.logit_softcap);
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "post_attention_norm.weight", {d.n_embd}, "post-attention norm");
    expect_shape(f, b + "post_ffw_norm.weight", {d.n_embd}, "post-FFN norm");
  }
  RopeParams local = d.rope;  // unscaled positions, their own base
  local.freq_base = 10000.f;
  local.freq_scale = 1.f;
  if (c.traits.gemma4) return read_gemma4(f, p, local, c);
  read_sliding_window(f, p, 6, local, c);
}

// Gemma 4 (llama.cpp's llama_model_gemma4) as far as weft runs it: scores unscaled (its
// f_attention_scale 1), a layer without attn_v using K's projection as V, each layer's output
// scale where the file has one, the window and one sliding-window flag per layer
// (sliding_window_pattern; a single value sets every layer), local layers rotating
// rope.dimension_count_swa dims at their own base and without rope_freqs, which the global layers
// need (the converter's proportional RoPE: factor 1e30 stops a pair turning); E2B and E4B's
// per-layer FFN widths, per-layer inputs and KV-sharing layers (read_gemma4_small).
void read_gemma4(const gguf::File& f, const std::string& p, RopeParams local, ModelConfig& c) {
  auto& d = c.dims;
  d.attn_scale = 1.f;
  const int64_t head_dim_swa = positive(f, p + "attention.key_length_swa",
                                        f.get_int_opt(p + "attention.key_length_swa").value_or(d.head_dim), 4096);
  if (const auto v = f.get_int_opt(p + "attention.value_length_swa"); v && *v != head_dim_swa)
    fail("model", "{}attention.value_length_swa {} != key_length_swa {} is not supported", p, *v, head_dim_swa);
  local.n_rot = positive(f, p + "rope.dimension_count_swa",
                         f.get_int_opt(p + "rope.dimension_count_swa").value_or(std::min(d.rope.n_rot, head_dim_swa)),
                         head_dim_swa);
  if (local.n_rot % 2) fail("model", "{}rope.dimension_count_swa {} is odd", p, local.n_rot);
  local.freq_factors.clear();

  d.n_swa = f.get_int(p + "attention.sliding_window");
  if (d.n_swa <= 0 || (c.n_ctx_train > 0 && d.n_swa > c.n_ctx_train))
    fail("model", "{}attention.sliding_window {} is out of range (1..context_length {})", p, d.n_swa, c.n_ctx_train);
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  const gguf::Value* pattern = f.find(pattern_key);
  if (!pattern) fail("model", "{} is missing: Gemma 4 lists its sliding-window layers", pattern_key);
  d.swa_layers.assign(d.n_layer, 0);
  if (pattern->is_array()) {
    const auto& flags = pattern->as_array(pattern_key);
    if (static_cast<int64_t>(flags.size()) != d.n_layer)
      fail("model", "{} has {} flags for {} layers", pattern_key, flags.size(), d.n_layer);
    for (int64_t l = 0; l < d.n_layer; ++l) {
      const auto& e = flags[l];
      d.swa_layers[l] = std::holds_alternative<bool>(e.v) ? e.as_bool(pattern_key) : e.as_i64(pattern_key) != 0;
    }
  } else {
    const bool all =
        std::holds_alternative<bool>(pattern->v) ? pattern->as_bool(pattern_key) : pattern->as_i64(pattern_key) != 0;
    d.swa_layers.assign(d.n_layer, all);
  }
  d.rope_swa = local;
  d.rope_swa.freq_base = static_cast<float>(f.get_float_opt(p + "rope.freq_base_swa").value_or(local.freq_base));
  if (!(d.rope_swa.freq_base > 1)) fail("model", "{}rope.freq_base_swa {} is out of range", p, d.rope_swa.freq_base);
  read_gemma4_heads(f, p, head_dim_swa, d);
  bool any_global = false;
  for (int64_t l = 0; l < d.n_layer; ++l) any_global |= d.swa_layers[l] == 0;
  if (any_global && d.rope.freq_factors.empty())
    fail("model", "rope_freqs.weight (f32[{}]) is missing: Gemma 4's global layers need it", d.rope.n_rot / 2);

  read_gemma4_small(f, p, c);

  c.k_as_v.assign(d.n_layer, 0);
  c.out_scale.assign(d.n_layer, 0);
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    c.k_as_v[l] = f.find_tensor(b + "attn_v.weight") == nullptr;
    expect_shape(f, b + "attn_q_norm.weight", {d.head_dim_of(static_cast<int>(l))}, "q norm");
    if (d.owns_kv(static_cast<int>(l)))
      expect_shape(f, b + "attn_k_norm.weight", {d.head_dim_of(static_cast<int>(l))}, "k norm");
    if (const gguf::TensorInfo* t = f.find_tensor(b + "layer_output_scale.weight")) {
      float s = 0;
      if (t->type != DType::F32 || t->n_elements() != 1) fail("model", "{}layer_output_scale.weight must be f32[1]", b);
      std::memcpy(&s, t->data, sizeof s);
      if (!std::isfinite(s)) fail("model", "{}layer_output_scale.weight is {}", b, s);
      c.out_scale[l] = 1;
    }
  }
}

// Sliding-window layers (llama.cpp's set_swa_pattern: of every `pattern` layers the last is
// global) and their RoPE: `local`, its base replaced by rope.freq_base_swa where the file has it.
void read_sliding_window(const gguf::File& f, const std::string& p, int64_t default_pattern, RopeParams local,
                         ModelConfig& c) {
  auto& d = c.dims;
  d.n_swa = f.get_int_opt(p + "attention.sliding_window").value_or(0);
  if (d.n_swa < 0 || (c.n_ctx_train > 0 && d.n_swa > c.n_ctx_train))
    fail("model", "{}attention.sliding_window {} is out of range (0..context_length {})", p, d.n_swa, c.n_ctx_train);
  if (d.n_swa == 0) return;
  const int64_t pattern = f.get_int_opt(p + "attention.sliding_window_pattern").value_or(default_pattern);
  if (pattern < 0 || pattern > d.n_layer + 1)
    fail("model", "{}attention.sliding_window_pattern {} is out of range (0..{})", p, pattern, d.n_layer + 1);
  d.swa_layers.resize(d.n_layer);
  for (int64_t l = 0; l < d.n_layer; ++l) d.swa_layers[l] = pattern == 0 || l % pattern < pattern - 1;
  d.rope_swa = local;
  d.rope_swa.freq_base = static_cast<float>(f.get_float_opt(p + "rope.freq_base_swa").value_or(local.freq_base));
  if (!(d.rope_swa.freq_base > 1)) fail("model", "{}rope.freq_base_swa {} is out of range", p, d.rope_swa.freq_base);
}

// gpt-oss: its biases and sinks against the hyper-parameters, then its routing, its SwiGLU and
// its sliding windows (every other layer; their RoPE as the global layers', YaRN included).
void read_gpt_oss(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  const int64_t q_w = d.n_head * d.head_dim, kv_w = d.n_head_kv * d.head_dim;
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "attn_sinks.weight", {d.n_head}, "attention sinks");
    expect_shape(f, b + "post_attention_norm.weight", {d.n_embd}, "FFN norm");
    expect_shape(f, b + "attn_q.bias", {q_w}, "q bias");
    expect_shape(f, b + "attn_k.bias", {kv_w}, "k bias");
    expect_shape(f, b + "attn_v.bias", {kv_w}, "v bias");
    expect_shape(f, b + "attn_output.bias", {d.n_embd}, "attention output bias");
    expect_shape(f, b + "ffn_gate_inp.bias", {d.n_expert}, "router bias");
    expect_shape(f, b + "ffn_gate_exps.bias", {d.n_ff_exp, d.n_expert}, "expert bias");
    expect_shape(f, b + "ffn_up_exps.bias", {d.n_ff_exp, d.n_expert}, "expert bias");
    expect_shape(f, b + "ffn_down_exps.bias", {d.n_embd, d.n_expert}, "expert bias");
  }
  d.expert_gating = graph::Dims::Gating::SoftmaxSelected;
  d.expert_weights_norm = false;
  read_sliding_window(f, p, 2, d.rope, c);
}

// Phi-3: the fused tensors' widths, the optional output bias, LongRoPE's factors (short ones
// by default; for_context swaps in the long ones) and its attention factor.
void read_phi3(const gguf::File& f, const std::string& p, ModelConfig& c) {
  const auto& d = c.dims;
  const int64_t q_w = d.n_head * d.head_dim, kv_w = d.n_head_kv * d.head_dim;
  c.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    if (c.fused_qkv) expect_shape(f, b + "attn_qkv.weight", {d.n_embd, q_w + 2 * kv_w}, "fused q/k/v");
    expect_shape(f, b + "ffn_up.weight", {d.n_embd, 2 * d.n_ff}, "fused gate/up");
  }
  if (f.find_tensor("output.bias")) {
    expect_shape(f, "output.bias", {d.n_vocab}, "output bias");
    c.output_bias = true;
  }
  auto& r = c.dims.rope;
  c.rope_original_ctx = f.get_int_opt(p + "rope.scaling.original_context_length").value_or(c.n_ctx_train);
  c.rope_factors_long = f32_vector(f, "rope_factors_long.weight", r.n_rot / 2);
  if (auto s = f32_vector(f, "rope_factors_short.weight", r.n_rot / 2); !s.empty()) r.freq_factors = std::move(s);
  for (const auto* v : {&c.rope_factors_long, &r.freq_factors})
    for (float x : *v)
      if (!(x > 0 && std::isfinite(x))) fail("model", "rope factor {} is not a positive number", x);
  r.attn_factor = static_cast<float>(f.get_float_opt(p + "rope.scaling.attn_factor").value_or(1.0));
  if (!(r.attn_factor > 0 && r.attn_factor < 100))
    fail("model", "rope.scaling.attn_factor {} is out of range", r.attn_factor);
}

// DeepSeek's multi-head latent attention (llama.cpp's deepseek2 loader and graph): the latent and
// RoPE key a cache row holds (key_length = kv_lora_rank + n_rot, value_length = kv_lora_rank), the
// heads' value width, the query through a compressed latent (q_lora_rank > 0) or not (V2-Lite),
// and the scores' scale with DeepSeek's YaRN correction (rope.scaling.yarn_log_multiplier).
void read_mla(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  auto& r = d.rope;
  d.kv_lora_rank = positive(f, p + "attention.kv_lora_rank", f.get_int(p + "attention.kv_lora_rank"), 1 << 14);
  d.v_head_dim = positive(f, p + "attention.value_length_mla",
                          f.get_int_opt(p + "attention.value_length_mla").value_or(d.head_dim), 4096);
  const int64_t q_lora = c.q_lora_rank = f.get_int_opt(p + "attention.q_lora_rank").value_or(0);
  if (q_lora < 0 || q_lora > (1 << 16)) fail("model", "{}attention.q_lora_rank {} is out of range", p, q_lora);
  if (r.n_rot >= d.head_dim)
    fail("model", "{}rope.dimension_count {} leaves no unrotated query features of {}", p, r.n_rot, d.head_dim);
  if (auto k = f.get_int_opt(p + "attention.key_length"); k && *k != d.kv_lora_rank + r.n_rot)
    fail("model", "{}attention.key_length {} is not kv_lora_rank + rope.dimension_count ({})", p, *k,
         d.kv_lora_rank + r.n_rot);
  if (auto v = f.get_int_opt(p + "attention.value_length"); v && *v != d.kv_lora_rank)
    fail("model", "{}attention.value_length {} is not kv_lora_rank {}", p, *v, d.kv_lora_rank);
  if (d.kv_lora_rank + r.n_rot > 576)
    fail("model", "latent rows of {} values: the attention kernel takes at most 576", d.kv_lora_rank + r.n_rot);
  const int64_t nope = d.head_dim - r.n_rot, q_w = d.n_head * d.head_dim;
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    if (q_lora > 0) {
      expect_shape(f, b + "attn_q_a.weight", {d.n_embd, q_lora}, "compressed query");
      expect_shape(f, b + "attn_q_a_norm.weight", {q_lora}, "compressed query norm");
      expect_shape(f, b + "attn_q_b.weight", {q_lora, q_w}, "query");
    } else {
      expect_shape(f, b + "attn_q.weight", {d.n_embd, q_w}, "query");
    }
    expect_shape(f, b + "attn_kv_a_mqa.weight", {d.n_embd, d.kv_lora_rank + r.n_rot}, "key/value latent");
    expect_shape(f, b + "attn_kv_a_norm.weight", {d.kv_lora_rank}, "key/value latent norm");
    expect_shape(f, b + "attn_k_b.weight", {nope, d.kv_lora_rank, d.n_head}, "key up-projection");
    expect_shape(f, b + "attn_v_b.weight", {d.kv_lora_rank, d.v_head_dim, d.n_head}, "value up-projection");
    expect_shape(f, b + "attn_output.weight", {d.n_head * d.v_head_dim, d.n_embd}, "attention output");
  }
  // The scores' scale, as deepseek2.cpp pre-scales it for YaRN: mscale^2 / sqrt(head_dim), with
  // mscale = the rotation's attention factor times (1 + 0.1 ln(factor)) (1 + 0.1 m ln(factor)), m the
  // yarn_log_multiplier (which the converter writes times 0.1). With m, llama_context divides the
  // rotation's factor by 1 + 0.1 ln(factor), which the rope kernel multiplies back.
  const double log_mul = f.get_float_opt(p + "rope.scaling.yarn_log_multiplier").value_or(0.0) / 0.1;
  const double ln_factor = std::log(1.0 / static_cast<double>(r.freq_scale));
  if (r.yarn_ext_factor != 0 && log_mul != 0) r.attn_factor = static_cast<float>(r.attn_factor / (1 + 0.1 * ln_factor));
  const double mscale = r.attn_factor * (1 + 0.1 * ln_factor) * (1 + 0.1 * log_mul * ln_factor);
  d.attn_scale = static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(d.head_dim)));
}

// Qwen 3.5 and Qwen3-Next (llama.cpp's qwen35 / qwen35moe / qwen3next loaders): the Gated
// DeltaNet layers' shapes (ssm.* keys: key heads ssm.group_count, value heads ssm.time_step_rank,
// both ssm.state_size wide), which layers are full attention, and for Qwen 3.5 IMROPE as text
// positions see it: every section turns at the token's position except the fourth (its position
// 0), whose pairs stay put.
void read_qwen35(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  const bool next = c.traits.qwen3next;
  d.linear_v_grouped = next;
  d.full_attention_interval = f.get_int_opt(p + "full_attention_interval").value_or(4);
  if (d.full_attention_interval < 1 || d.full_attention_interval > d.n_layer + 1)
    fail("model", "{}full_attention_interval {} is out of range (1..{})", p, d.full_attention_interval, d.n_layer + 1);
  d.linear_conv_kernel = f.get_int(p + "ssm.conv_kernel");
  if (d.linear_conv_kernel < 1 || d.linear_conv_kernel > 16)
    fail("model", "{}ssm.conv_kernel {} is out of range (1..16)", p, d.linear_conv_kernel);
  d.linear_head_dim = positive(f, p + "ssm.state_size", f.get_int(p + "ssm.state_size"), 1024);
  d.linear_k_heads = positive(f, p + "ssm.group_count", f.get_int(p + "ssm.group_count"), 4096);
  d.linear_v_heads = positive(f, p + "ssm.time_step_rank", f.get_int(p + "ssm.time_step_rank"), 4096);
  if (d.linear_v_heads % d.linear_k_heads != 0)
    fail("model", "{}ssm.time_step_rank {} (value heads) is not a multiple of ssm.group_count {} (key heads)", p,
         d.linear_v_heads, d.linear_k_heads);
  if (const int64_t inner = f.get_int(p + "ssm.inner_size"); inner != d.linear_v_heads * d.linear_head_dim)
    fail("model", "{}ssm.inner_size {} is not ssm.time_step_rank x ssm.state_size ({}): value heads as wide as keys", p,
         inner, d.linear_v_heads * d.linear_head_dim);
  const int64_t nk = d.linear_k_heads * d.linear_head_dim, nv = d.linear_v_heads * d.linear_head_dim;
  const int64_t q_w = d.n_head * d.head_dim, kv_w = d.n_head_kv * d.head_dim;
  // Qwen3-Next's older files: ssm_in (q, k, v, z per key head) where newer ones have attn_qkv.
  for (int64_t l = 0; l < d.n_layer && next; ++l)
    if (d.linear_attention(static_cast<int>(l))) {
      c.linear_qkvz = f.find_tensor(fmt::format("blk.{}.ssm_in.weight", l)) != nullptr;
      break;
    }
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "post_attention_norm.weight", {d.n_embd}, "FFN norm");
    if (!d.linear_attention(static_cast<int>(l))) {
      expect_shape(f, b + "attn_q.weight", {d.n_embd, 2 * q_w}, "query and gate");
      expect_shape(f, b + "attn_k.weight", {d.n_embd, kv_w}, "key");
      expect_shape(f, b + "attn_v.weight", {d.n_embd, kv_w}, "value");
      expect_shape(f, b + "attn_q_norm.weight", {d.head_dim}, "q norm");
      expect_shape(f, b + "attn_k_norm.weight", {d.head_dim}, "k norm");
      continue;
    }
    if (c.linear_qkvz) {
      expect_shape(f, b + "ssm_in.weight", {d.n_embd, 2 * nk + 2 * nv}, "linear attention q/k/v/z");
    } else {
      expect_shape(f, b + "attn_qkv.weight", {d.n_embd, 2 * nk + nv}, "linear attention q/k/v");
      expect_shape(f, b + "attn_gate.weight", {d.n_embd, nv}, "linear attention output gate");
    }
    expect_shape(f, b + "ssm_conv1d.weight", {d.linear_conv_kernel, 2 * nk + nv}, "linear attention convolution");
    if (next) {
      expect_shape(f, b + "ssm_ba.weight", {d.n_embd, 2 * d.linear_v_heads}, "linear attention beta and decay");
    } else {
      expect_shape(f, b + "ssm_beta.weight", {d.n_embd, d.linear_v_heads}, "linear attention beta");
      expect_shape(f, b + "ssm_alpha.weight", {d.n_embd, d.linear_v_heads}, "linear attention decay");
    }
    expect_shape(f, b + "ssm_dt.bias", {d.linear_v_heads}, "linear attention decay bias");
    expect_shape(f, b + "ssm_a", {d.linear_v_heads}, "linear attention decay rate");
    expect_shape(f, b + "ssm_norm.weight", {d.linear_head_dim}, "linear attention norm");
    expect_shape(f, b + "ssm_out.weight", {nv, d.n_embd}, "linear attention output");
  }
  if (next) return;  // NeoX's rotation of the first n_rot features
  // ggml's IMROPE: pair i turns at the position of sector i % (sum of sections): the first three
  // sections' (each every third sector up to three times its size) the token's, the rest 0.
  const std::vector<int64_t> sec = f.get_int_array(p + "rope.dimension_sections");
  if (sec.size() < 3 || sec.size() > 4) fail("model", "{}rope.dimension_sections has {} values, not 4", p, sec.size());
  int64_t total = 0;
  for (int64_t x : sec) {
    if (x < 0 || x > d.rope.n_rot) fail("model", "{}rope.dimension_sections value {} is out of range", p, x);
    total += x;
  }
  if (total <= 0 || total > d.rope.n_rot / 2)
    fail("model", "{}rope.dimension_sections sum to {}, not 1..{}", p, total, d.rope.n_rot / 2);
  auto turns = [&](int64_t s) { return s < 3 * sec[s % 3]; };
  bool all = true;
  for (int64_t i = 0; i < d.rope.n_rot / 2; ++i) all = all && turns(i % total);
  if (all || !d.rope.freq_factors.empty()) return;
  d.rope.freq_factors.assign(d.rope.n_rot / 2, 1.f);
  for (int64_t i = 0; i < d.rope.n_rot / 2; ++i)
    if (!turns(i % total)) d.rope.freq_factors[i] = 1e30f;  // a pair that stays put (Gemma 4's trick)
}

}  // namespace

ModelConfig for_context(ModelConfig c, int64_t n_ctx_seq) {
  if (!c.rope_factors_long.empty() && n_ctx_seq > c.rope_original_ctx) c.dims.rope.freq_factors = c.rope_factors_long;
  return c;
}

ModelConfig read_config(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  c.traits = traits_of(c.arch);
  const std::string p = c.arch + ".";
  auto& d = c.dims;
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  d.n_embd = positive(f, p + "embedding_length", f.get_int(p + "embedding_length"), kMaxDim);
  d.n_layer = positive(f, p + "block_count", f.get_int(p + "block_count"), 4096);
  if (c.traits.qwen35) {  // multi-token prediction blocks at the end: not part of the model's forward
    const int64_t mtp = f.get_int_opt(p + "nextn_predict_layers").value_or(0);
    if (mtp < 0 || mtp >= d.n_layer)
      fail("model", "{}nextn_predict_layers {} is out of range (0..{})", p, mtp, d.n_layer - 1);
    d.n_layer -= mtp;
  }
  auto required = [&](const std::string& key, bool per_layer = false) {
    const auto v = per_model_int(f, key, per_layer);
    if (!v) fail("model", "{} is missing", key);
    return *v;
  };
  d.n_ff = positive(f, p + "feed_forward_length", required(p + "feed_forward_length", c.traits.gemma4), kMaxDim);
  d.n_head = positive(f, p + "attention.head_count", required(p + "attention.head_count"), 4096);
  d.n_head_kv = positive(f, p + "attention.head_count_kv",
                         per_model_int(f, p + "attention.head_count_kv", c.traits.gemma4).value_or(d.n_head), d.n_head);
  if (d.n_head % d.n_head_kv != 0)
    fail("model", "head_count {} is not a multiple of head_count_kv {}", d.n_head, d.n_head_kv);
  // MLA: a query head's width is key_length_mla (key_length is a cache row's: the latent and the
  // RoPE key), read_mla checks the rest.
  const std::string key_key = p + (c.traits.deepseek ? "attention.key_length_mla" : "attention.key_length");
  const auto key_len = f.get_int_opt(key_key);
  if (c.traits.deepseek && !key_len)
    fail("model",
         "{} is missing: DeepSeek files of the attn_kv_b layout (older converters) are not supported; "
         "convert the model again",
         key_key);
  if (!key_len && d.n_embd % d.n_head != 0)
    fail("model", "embedding_length {} is not a multiple of head_count {}", d.n_embd, d.n_head);
  d.head_dim = positive(f, key_key, key_len.value_or(d.n_embd / d.n_head), 4096);
  if (auto vl = f.get_int_opt(p + "attention.value_length"); vl && *vl != d.head_dim && !c.traits.deepseek)
    fail("model", "value_length {} != key_length {} is not supported", *vl, d.head_dim);
  d.norm_eps = static_cast<float>(f.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(d.norm_eps > 0 && d.norm_eps < 1)) fail("model", "layer_norm_rms_epsilon {} is out of range", d.norm_eps);
  c.n_ctx_train = f.get_int_opt(p + "context_length").value_or(2048);

  const auto& embd = f.tensor("token_embd.weight");
  if (embd.shape.size() != 2 || embd.shape[0] != d.n_embd)
    fail("model", "token_embd.weight must be [{}, n_vocab]", d.n_embd);
  d.n_vocab = embd.shape[1];
  c.tied_output = f.find_tensor("output.weight") == nullptr;

  auto& r = d.rope;
  r.n_rot = positive(f, p + "rope.dimension_count", f.get_int_opt(p + "rope.dimension_count").value_or(d.head_dim),
                     d.head_dim);
  if (r.n_rot % 2) fail("model", "rope.dimension_count {} is odd", r.n_rot);
  r.freq_base = static_cast<float>(f.get_float_opt(p + "rope.freq_base").value_or(10000.0));
  r.neox = c.traits.rope_neox;
  const std::string scaling = f.get_string_opt(p + "rope.scaling.type").value_or("none");
  const double factor = f.get_float_opt(p + "rope.scaling.factor").value_or(0.0);
  if (scaling == "linear" && factor > 0)
    r.freq_scale = static_cast<float>(1.0 / factor);
  else if (scaling == "llama3" && factor > 0) {
    r.llama3_factor = static_cast<float>(factor);
    r.llama3_low_freq_factor = static_cast<float>(f.get_float_opt(p + "rope.scaling.low_freq_factor").value_or(1.0));
    r.llama3_high_freq_factor = static_cast<float>(f.get_float_opt(p + "rope.scaling.high_freq_factor").value_or(4.0));
    r.llama3_original_ctx =
        static_cast<float>(f.get_int_opt(p + "rope.scaling.original_context_length").value_or(8192));
  } else if (scaling == "yarn" && factor > 0) {  // as llama_context sets it up for YaRN (ext_factor 1)
    r.freq_scale = static_cast<float>(1.0 / factor);
    r.yarn_ext_factor = static_cast<float>(f.get_float_opt(p + "rope.scaling.yarn_ext_factor").value_or(1.0));
    r.yarn_beta_fast = static_cast<float>(f.get_float_opt(p + "rope.scaling.yarn_beta_fast").value_or(32.0));
    r.yarn_beta_slow = static_cast<float>(f.get_float_opt(p + "rope.scaling.yarn_beta_slow").value_or(1.0));
    r.yarn_orig_ctx =
        static_cast<float>(f.get_int_opt(p + "rope.scaling.original_context_length").value_or(c.n_ctx_train));
    r.attn_factor = static_cast<float>(f.get_float_opt(p + "rope.scaling.attn_factor").value_or(1.0));
    if (f.get_float_opt(p + "rope.scaling.yarn_log_multiplier").value_or(0.0) != 0.0 && !c.traits.deepseek)
      fail("model", "rope.scaling.yarn_log_multiplier (DeepSeek's YaRN) is read for deepseek2 only");
    for (float v : {r.yarn_ext_factor, r.yarn_beta_fast, r.yarn_beta_slow, r.yarn_orig_ctx, r.attn_factor})
      if (!(v > 0 && std::isfinite(v))) fail("model", "rope.scaling yarn parameter {} is out of range", v);
  } else if (scaling != "none" && scaling != "linear" && scaling != "llama3" && scaling != "yarn" &&
             !(scaling == "longrope" && c.traits.phi3)) {  // LongRoPE: factors read by read_phi3
    fail("model", "rope scaling '{}' is not supported", scaling);
  }
  // Llama 3.1's scaling, precomputed by the converter.
  if (auto ff = f32_vector(f, "rope_freqs.weight", r.n_rot / 2); !ff.empty()) r.freq_factors = std::move(ff);
  if (c.traits.gemma) read_gemma(f, p, c);
  if (c.traits.phi3) read_phi3(f, p, c);
  read_experts(f, p, c);
  if (c.traits.gpt_oss) read_gpt_oss(f, p, c);
  if (c.traits.deepseek) read_mla(f, p, c);
  if (c.traits.qwen35) read_qwen35(f, p, c);
  return c;
}

graph::WeightTable weight_table(const gguf::File& f) {
  graph::WeightTable t;
  for (const auto& ti : f.tensors()) {
    graph::WeightInfo w{ti.type, ti.shape.empty() ? 1 : ti.shape[0], ti.shape.size() > 1 ? ti.shape[1] : 1, 1};
    for (size_t i = 2; i < ti.shape.size(); ++i) w.mats *= ti.shape[i];
    t[ti.name] = w;
  }
  return t;
}

}  // namespace weft::model
