#include "model/model_config.h"

#include "core/error.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

namespace weft::model {
namespace {

ArchTraits traits_of(const std::string& arch) {
  if (arch == "llama") return {.expert_weights_norm = true};  // Mixtral when it has experts
  if (arch == "qwen2") return {.qkv_bias = true, .rope_neox = true};
  if (arch == "qwen3") return {.qk_norm = true, .rope_neox = true};
  if (arch == "qwen2moe") return {.qkv_bias = true, .rope_neox = true, .moe = true, .shared_expert = true};
  if (arch == "qwen3moe") return {.qk_norm = true, .rope_neox = true, .moe = true, .expert_weights_norm = true};
  fail("model", "architecture '{}' is not supported (supported: llama, qwen2, qwen3, qwen2moe, qwen3moe)", arch);
}

int64_t positive(const gguf::File& f, const std::string& key, int64_t v, int64_t max) {
  if (v <= 0 || v > max) fail("model", "{}: {} is out of range (1..{})", key, v, max);
  return v;
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

// Expert counts and widths (llama.cpp's keys and defaults), then every layer's router and expert
// tensors against them, so a malformed file fails here with its key or tensor named.
void read_experts(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto& d = c.dims;
  d.n_expert = f.get_int_opt(p + "expert_count").value_or(0);
  d.n_expert_used = f.get_int_opt(p + "expert_used_count").value_or(0);
  if (d.n_expert == 0) {
    if (c.traits.moe) fail("model", "{}expert_count is missing or 0: {} is a mixture of experts", p, c.arch);
    if (d.n_expert_used != 0) fail("model", "{}expert_used_count is {} without experts", p, d.n_expert_used);
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
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    expect_shape(f, b + "ffn_gate_inp.weight", {d.n_embd, d.n_expert}, "router");
    expect_shape(f, b + "ffn_gate_exps.weight", {d.n_embd, d.n_ff_exp, d.n_expert}, "expert");
    expect_shape(f, b + "ffn_up_exps.weight", {d.n_embd, d.n_ff_exp, d.n_expert}, "expert");
    expect_shape(f, b + "ffn_down_exps.weight", {d.n_ff_exp, d.n_embd, d.n_expert}, "expert");
    if (!c.traits.shared_expert) continue;
    expect_shape(f, b + "ffn_gate_inp_shexp.weight", {d.n_embd}, "shared expert gate");
    expect_shape(f, b + "ffn_gate_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
    expect_shape(f, b + "ffn_up_shexp.weight", {d.n_embd, d.n_ff_shexp}, "shared expert");
    expect_shape(f, b + "ffn_down_shexp.weight", {d.n_ff_shexp, d.n_embd}, "shared expert");
  }
}

}  // namespace

ModelConfig read_config(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  c.traits = traits_of(c.arch);
  const std::string p = c.arch + ".";
  auto& d = c.dims;
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  d.n_embd = positive(f, p + "embedding_length", f.get_int(p + "embedding_length"), kMaxDim);
  d.n_layer = positive(f, p + "block_count", f.get_int(p + "block_count"), 4096);
  d.n_ff = positive(f, p + "feed_forward_length", f.get_int(p + "feed_forward_length"), kMaxDim);
  d.n_head = positive(f, p + "attention.head_count", f.get_int(p + "attention.head_count"), 4096);
  d.n_head_kv = positive(f, p + "attention.head_count_kv",
                         f.get_int_opt(p + "attention.head_count_kv").value_or(d.n_head), d.n_head);
  if (d.n_head % d.n_head_kv != 0)
    fail("model", "head_count {} is not a multiple of head_count_kv {}", d.n_head, d.n_head_kv);
  const auto key_len = f.get_int_opt(p + "attention.key_length");
  if (!key_len && d.n_embd % d.n_head != 0)
    fail("model", "embedding_length {} is not a multiple of head_count {}", d.n_embd, d.n_head);
  d.head_dim = positive(f, p + "attention.key_length", key_len.value_or(d.n_embd / d.n_head), 4096);
  if (auto vl = f.get_int_opt(p + "attention.value_length"); vl && *vl != d.head_dim)
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
  } else if (scaling != "none" && scaling != "linear" && scaling != "llama3") {
    fail("model", "rope scaling '{}' is not supported", scaling);
  }
  if (const auto* ff = f.find_tensor("rope_freqs.weight")) {
    if (ff->type != DType::F32 || ff->n_elements() != r.n_rot / 2)
      fail("model", "rope_freqs.weight must be f32[{}]", r.n_rot / 2);
    r.freq_factors.resize(r.n_rot / 2);  // llama 3.1 scaling, precomputed by the converter
    std::memcpy(r.freq_factors.data(), ff->data, ff->n_bytes);
  }
  read_experts(f, p, c);
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
