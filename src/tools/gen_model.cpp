// Random-weight GGUF generator (see gen_model.h). Every row of every tensor is drawn from its own
// counter-based stream (seed, tensor name, row), so rows can be produced in any order on any
// number of threads and the file is still byte-identical.
#include "tools/gen_model.h"

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kernels/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <unordered_set>

namespace weft::tools {
namespace {

constexpr int64_t kMinVocab = 3 + 256;  // <unk> <s> </s> + byte tokens
constexpr int64_t kQkK = 256;           // K-quant super-block (QK_K)
constexpr uint32_t kAlignment = 32;     // GGUF_DEFAULT_ALIGNMENT
constexpr uint32_t kQuantVersion = 2;   // GGML_QNT_VERSION: current block layouts

// ---- deterministic random numbers ----

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Sum of four 16-bit uniforms (Irwin-Hall), scaled to unit variance: bell-shaped, bounded by
// +-3.46, and one 64-bit draw per value, so generating 8B parameters stays cheap.
float normalish(uint64_t& state) {
  const uint64_t r = splitmix64(state);
  const float s = static_cast<float>(r & 0xffff) + static_cast<float>((r >> 16) & 0xffff) +
                  static_cast<float>((r >> 32) & 0xffff) + static_cast<float>(r >> 48);
  // Each uniform has mean 32767.5 and variance 65536^2/12; four of them: sd 65536/sqrt(3).
  constexpr float kScale = 1.7320508f / 65536.0f;
  return (s - 4 * 32767.5f) * kScale;
}

// Uniform in [0, 1), 24 bits.
float uniform01(uint64_t& state) { return static_cast<float>(splitmix64(state) >> 40) * 0x1p-24f; }

// ---- tensor set ----

enum class Init { Matrix, Norm, Bias, Sink, RopeShort, RopeLong, RopeProportional, LayerScale, Decay, TimeStepBias };

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  Init init;
};

// One row of a tensor as f32. Matrices: sd 1/sqrt(row length) so y = W x keeps O(1) activations
// through every layer (and the logits O(1)); norms 1 +- ~0.1 so a test can tell whether the right
// norm weight was applied; biases small.
void gen_row(uint64_t tensor_seed, int64_t row, Init init, float* out, int64_t n) {
  uint64_t state = tensor_seed ^ (static_cast<uint64_t>(row) * 0xd6e8feb86659fd93ull);
  splitmix64(state);
  switch (init) {
    case Init::Matrix: {
      const float sd = 1.0f / std::sqrt(static_cast<float>(n));
      for (int64_t i = 0; i < n; ++i) out[i] = sd * normalish(state);
      return;
    }
    case Init::Norm:
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.1f * normalish(state);
      return;
    case Init::Bias:
      for (int64_t i = 0; i < n; ++i) out[i] = 0.1f * normalish(state);
      return;
    case Init::Sink:  // a logit beside the scores' O(1) ones, so that a sink takes a share of the softmax
      for (int64_t i = 0; i < n; ++i) out[i] = normalish(state);
      return;
    case Init::RopeShort:  // LongRoPE's divisors: near 1 within the original context
      for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * std::abs(normalish(state));
      return;
    case Init::RopeLong:  // beyond it, growing towards the low frequencies as Phi-3.5's do
      for (int64_t i = 0; i < n; ++i) {
        const float u = n > 1 ? static_cast<float>(i) / static_cast<float>(n - 1) : 0.f;
        out[i] = 1.0f + 30.0f * u * u;
      }
      return;
    case Init::RopeProportional:  // Gemma 4's global layers: the first quarter of the pairs turn, 1e30 stops the rest
      for (int64_t i = 0; i < n; ++i) out[i] = i < std::max<int64_t>(1, n / 4) ? 1.0f : 1e30f;
      return;
    case Init::LayerScale:  // Gemma 4's layer output scale: far enough from 1 to move the residual's balance
      for (int64_t i = 0; i < n; ++i) out[i] = 0.25f + std::abs(normalish(state));
      return;
    // Gated DeltaNet's per-head decay rate: ssm_a = -exp(A_log) as its converter writes it, A_log
    // uniform in [-1, 1), so -2.7 .. -0.37; and the time-step bias (dt_bias) uniform in [-4, 0), so that
    // softplus(alpha + dt_bias) * ssm_a keeps some heads' state for tens of tokens, others' for a few.
    case Init::Decay:
      for (int64_t i = 0; i < n; ++i) out[i] = -std::exp(2.0f * uniform01(state) - 1.0f);
      return;
    case Init::TimeStepBias:
      for (int64_t i = 0; i < n; ++i) out[i] = -4.0f * uniform01(state);
      return;
  }
}

// f32 row -> the storage type. Plain types are converted here; block types by the reference
// quantizer, so a file never depends on which SIMD kernels this machine has.
void encode_row(DType t, const float* src, uint8_t* dst, int64_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_fp16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default: kernels::quantize_row_ref(t, src, dst, n);
  }
}

bool use_more_bits(int i_layer, int n_layer) {
  // llama.cpp (llama-quant.cpp): the first and last eighth of the layers, and every third between.
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

struct ArchInfo {
  bool qkv_bias;
  bool qk_norm;
  float rope_freq_base;
  float rms_eps;
  enum class Ffn { Dense, Experts, Either } ffn = Ffn::Dense;  // what the architecture's FFN may be
  bool shared_expert = false;
  bool gemma = false;  // post-attention / post-FFN norms, sliding-window layers (their keys)
  bool phi3 = false;   // fused attn_qkv and [gate; up] ffn_up, LongRoPE factors
  // Attention sinks, biases on the attention output, the router and the experts, post_attention_norm
  // as the FFN norm, a sliding window every other layer and YaRN.
  bool gpt_oss = false;
  // Gemma 4: K's projection as V on the global layers (no attn_v there), proportional RoPE
  // (rope_freqs), one sliding-window flag per layer and its head sizes per layer kind.
  bool gemma4 = false;
  // DeepSeek V3: multi-head latent attention, leading dense layers, shared experts beside routed
  // ones picked by sigmoid scores plus a selection bias (exp_probs_b) within the best groups.
  bool mla = false;
  // Qwen 3.5: Gated DeltaNet linear-attention layers between gated full-attention ones (attn_q holds
  // [q | gate] per head, heads roped on their first n_rot features by IMRoPE's sections), and
  // post_attention_norm as the FFN norm.
  bool delta_net = false;
  // Qwen3-Next (with delta_net): value heads in the checkpoint's grouped order, beta and alpha in
  // one ssm_ba, plain partial NeoX RoPE (no sections); q/k/v/z in ssm_in with --fused-qkvz.
  bool qwen3next = false;
};

ArchInfo arch_info(std::string_view arch) {
  // Values of the released models of each family (Llama 2 / Qwen2 / Qwen3, Mixtral, Qwen1.5-MoE,
  // Qwen3-30B-A3B).
  using Ffn = ArchInfo::Ffn;
  if (arch == "llama") return {false, false, 10000.0f, 1e-5f, Ffn::Either};
  if (arch == "qwen2") return {true, false, 1000000.0f, 1e-6f};
  if (arch == "qwen3") return {false, true, 1000000.0f, 1e-6f};
  if (arch == "qwen2moe") return {true, false, 1000000.0f, 1e-6f, Ffn::Experts, true};
  if (arch == "qwen3moe") return {false, true, 1000000.0f, 1e-6f, Ffn::Experts};
  if (arch == "gemma3") return {false, true, 1000000.0f, 1e-6f, Ffn::Dense, false, true};  // Gemma 3 1B..27B
  // Gemma 4 E2B..31B, and 26B-A4B with experts
  if (arch == "gemma4") return {false, true, 1000000.0f, 1e-6f, Ffn::Either, false, true, false, false, true};
  if (arch == "phi3") return {false, false, 10000.0f, 1e-5f, Ffn::Dense, false, false, true};  // Phi-3.5 / Phi-4 mini
  if (arch == "gpt-oss") return {true, false, 150000.0f, 1e-5f, Ffn::Experts, false, false, false, true};
  // DeepSeek V3 / R1 (and V2's layout with sigmoid routing)
  if (arch == "deepseek2") return {false, false, 10000.0f, 1e-6f, Ffn::Experts, true, false, false, false, false, true};
  // Qwen3.5-0.8B..27B, and 35B-A3B..397B-A17B with experts beside a sigmoid-gated shared one
  if (arch == "qwen35")
    return {.qkv_bias = false, .qk_norm = true, .rope_freq_base = 1e7f, .rms_eps = 1e-6f, .delta_net = true};
  // (qwen3next: Qwen3-Next-80B-A3B, the same besides its own layout)
  if (arch == "qwen35moe" || arch == "qwen3next")
    return {.qkv_bias = false,
            .qk_norm = true,
            .rope_freq_base = 1e7f,
            .rms_eps = 1e-6f,
            .ffn = Ffn::Experts,
            .shared_expert = true,
            .delta_net = true,
            .qwen3next = arch == "qwen3next"};
  fail("gen-model",
       "unknown arch '{}' (llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma3, gemma4, phi3, gpt-oss, deepseek2, qwen35, "
       "qwen35moe, qwen3next)",
       arch);
}

// Gemma 4 E2B's layers attending over an earlier layer's cache: the last n_kv_shared, their FFN
// twice as wide.
bool gen_kv_shared(const GenModelShape& s, int l) { return l >= s.n_layer - s.n_kv_shared; }
int64_t gen_layer_ff(const GenModelShape& s, int l) { return gen_kv_shared(s, l) ? 2 * s.n_ff : s.n_ff; }

// The feed-forward tensors of layer l: a dense SwiGLU, or (an MoE preset) the router and the
// stacked experts, and qwen2moe's / DeepSeek's shared expert.
template <typename Matrix, typename Stack, typename Vec>
void ffn_specs(const ArchInfo& a, const GenModelShape& s, int l, Matrix matrix, Stack stack, Vec vec) {
  const bool dense = s.n_expert == 0 || l < s.n_dense_lead;  // DeepSeek's first layers are dense
  if (dense || a.gemma4) {                                   // Gemma 4 26B-A4B keeps its dense FFN beside the experts
    const int64_t ff = gen_layer_ff(s, l);
    if (a.phi3) {
      matrix("ffn_up.weight", l, s.n_embd, 2 * ff);  // [gate; up]
    } else {
      matrix("ffn_gate.weight", l, s.n_embd, ff);  // (embd -> ff)
      matrix("ffn_up.weight", l, s.n_embd, ff);
    }
    matrix("ffn_down.weight", l, ff, s.n_embd);  // (ff -> embd)
    if (dense) return;
  }
  vec("ffn_gate_inp.weight", l, std::vector<int64_t>{s.n_embd, s.n_expert},
      Init::Matrix);  // router: f32, as llama-quantize keeps it
  // DeepSeek V3's e_score_correction_bias: added to the scores for the choice only, small enough
  // that it changes some choices, not most
  if (a.mla) vec("exp_probs_b.bias", l, std::vector<int64_t>{s.n_expert}, Init::Bias);
  if (a.gemma4) {  // the experts' gate and up in one stack, a scale per expert, the branches' norms
    vec("ffn_gate_inp.scale", l, std::vector<int64_t>{s.n_embd}, Init::Norm);
    stack("ffn_gate_up_exps.weight", l, s.n_embd, 2 * s.n_ff_exp);
    stack("ffn_down_exps.weight", l, s.n_ff_exp, s.n_embd);
    vec("ffn_down_exps.scale", l, std::vector<int64_t>{s.n_expert}, Init::Norm);
    for (const char* norm : {"pre_ffw_norm_2.weight", "post_ffw_norm_1.weight", "post_ffw_norm_2.weight"})
      vec(norm, l, std::vector<int64_t>{s.n_embd}, Init::Norm);
    return;
  }
  stack("ffn_gate_exps.weight", l, s.n_embd, s.n_ff_exp);  // (expert, embd -> ff_exp)
  stack("ffn_up_exps.weight", l, s.n_embd, s.n_ff_exp);
  stack("ffn_down_exps.weight", l, s.n_ff_exp, s.n_embd);  // (expert, ff_exp -> embd)
  if (a.gpt_oss) {  // a bias per router logit, and per expert on each of its matrices' outputs
    vec("ffn_gate_inp.bias", l, std::vector<int64_t>{s.n_expert}, Init::Bias);
    vec("ffn_gate_exps.bias", l, std::vector<int64_t>{s.n_ff_exp, s.n_expert}, Init::Bias);
    vec("ffn_up_exps.bias", l, std::vector<int64_t>{s.n_ff_exp, s.n_expert}, Init::Bias);
    vec("ffn_down_exps.bias", l, std::vector<int64_t>{s.n_embd, s.n_expert}, Init::Bias);
  }
  if (!a.shared_expert) return;
  if (!a.mla) vec("ffn_gate_inp_shexp.weight", l, std::vector<int64_t>{s.n_embd}, Init::Matrix);  // qwen2moe's gate
  matrix("ffn_gate_shexp.weight", l, s.n_embd, s.n_ff_shexp);
  matrix("ffn_up_shexp.weight", l, s.n_embd, s.n_ff_shexp);
  matrix("ffn_down_shexp.weight", l, s.n_ff_shexp, s.n_embd);
}

// Gemma 4's layer kinds: five sliding-window layers, then a global one, as its released models
// have them; a model of fewer than 6 layers alternates, so both kinds are in it.
bool gen_swa_layer(const GenModelShape& s, int l) {
  const int pattern = s.n_layer < 6 ? 2 : 6;
  return l % pattern < pattern - 1;
}

// Layer l's head size and KV heads: Gemma 4's sliding-window layers may have their own.
std::pair<int64_t, int64_t> gen_layer_heads(const ArchInfo& a, const GenModelShape& s, int l) {
  if (!a.gemma4 || !gen_swa_layer(s, l)) return {s.head_dim, s.n_head_kv};
  return {s.head_dim_swa > 0 ? s.head_dim_swa : s.head_dim, s.n_head_kv_swa > 0 ? s.n_head_kv_swa : s.n_head_kv};
}

// Qwen 3.5's layer kinds: every full_attn_interval-th layer full attention, the others Gated
// DeltaNet (llama.cpp's recurrent_layer_arr: (il + 1) % interval != 0); other archs: none.
bool gen_recurrent_layer(const GenModelShape& s, int l) {
  return s.full_attn_interval > 0 && (l + 1) % s.full_attn_interval != 0;
}

// The attention tensors of layer l: q, k and v (Phi-3's fused), their biases and head norms, the
// output projection and gpt-oss's sinks.
template <typename Matrix, typename Vec>
void attention_specs(const ArchInfo& a, const GenModelShape& s, int l, Matrix matrix, Vec vec) {
  const auto [layer_head_dim, layer_kv] = gen_layer_heads(a, s, l);
  const int64_t q_w = s.n_head * layer_head_dim, n_embd_kv = layer_head_dim * layer_kv;
  if (a.phi3) {
    matrix("attn_qkv.weight", l, s.n_embd, q_w + 2 * n_embd_kv);  // [q; k; v]
  } else {
    // (embd -> heads*head_dim); Qwen 3.5's gated attention: per head head_dim rows of q, then
    // head_dim rows of its output gate
    matrix("attn_q.weight", l, s.n_embd, a.delta_net ? 2 * q_w : q_w);
    if (!gen_kv_shared(s, l)) {
      matrix("attn_k.weight", l, s.n_embd, n_embd_kv);  // (embd -> kv_heads*head_dim)
      if (!a.gemma4 || gen_swa_layer(s, l)) matrix("attn_v.weight", l, s.n_embd, n_embd_kv);
    }
  }
  if (a.qkv_bias) {
    vec("attn_q.bias", l, q_w, Init::Bias);
    vec("attn_k.bias", l, n_embd_kv, Init::Bias);
    vec("attn_v.bias", l, n_embd_kv, Init::Bias);
  }
  if (a.qk_norm) {
    vec("attn_q_norm.weight", l, layer_head_dim, Init::Norm);  // shared by all heads
    if (!gen_kv_shared(s, l)) vec("attn_k_norm.weight", l, layer_head_dim, Init::Norm);
  }
  matrix("attn_output.weight", l, q_w, s.n_embd);
  if (a.gpt_oss) {
    vec("attn_output.bias", l, s.n_embd, Init::Bias);
    vec("attn_sinks.weight", l, s.n_head, Init::Sink);
  }
}

// Qwen 3.5's Gated DeltaNet layer as its converter writes it for llama.cpp: the fused [q; k; v]
// projection (value heads reordered from the checkpoint's grouped order to tiled: value head h
// reads key head h % lin_k_heads), its output gate z, the causal conv over those channels (never
// quantized, as llama-quantize leaves ssm_conv1d), the per-value-head decay (ssm_a = -exp(A_log)),
// its time-step bias and input projection (ssm_alpha), the write strength's (ssm_beta), the gated
// RMS norm over each value head (its weight stored as is: the +1 of Qwen's other norms is not
// applied to it) and the output projection. Qwen3-Next's converter keeps the checkpoint's grouped
// order (value heads h*r .. h*r + r - 1 read key head h) and writes beta and alpha as one ssm_ba
// ([beta; alpha] of each key head's value heads); its older files hold q, k, v and z in one ssm_in
// (per key head: q, k, its value heads' v, their z), `fused_qkvz`.
template <typename Matrix, typename F32>
void delta_net_specs(const ArchInfo& a, const GenModelShape& s, bool fused_qkvz, int l, Matrix matrix, F32 f32) {
  const int64_t k_dim = s.lin_k_heads * s.lin_head_dim, v_dim = s.lin_v_heads * s.lin_head_dim;
  const int64_t conv_dim = 2 * k_dim + v_dim;
  if (fused_qkvz) {
    matrix("ssm_in.weight", l, s.n_embd, conv_dim + v_dim);
  } else {
    matrix("attn_qkv.weight", l, s.n_embd, conv_dim);
    matrix("attn_gate.weight", l, s.n_embd, v_dim);
  }
  f32("ssm_conv1d.weight", l, {s.conv_kernel, conv_dim}, Init::Matrix);  // a row of taps per channel
  f32("ssm_dt.bias", l, {s.lin_v_heads}, Init::TimeStepBias);
  f32("ssm_a", l, {s.lin_v_heads}, Init::Decay);
  if (a.qwen3next) {
    matrix("ssm_ba.weight", l, s.n_embd, 2 * s.lin_v_heads);
  } else {
    matrix("ssm_beta.weight", l, s.n_embd, s.lin_v_heads);
    matrix("ssm_alpha.weight", l, s.n_embd, s.lin_v_heads);
  }
  f32("ssm_norm.weight", l, {s.lin_head_dim}, Init::Norm);
  matrix("ssm_out.weight", l, v_dim, s.n_embd);
}

// DeepSeek's latent attention as its converter writes it for llama.cpp's absorbed form: the query
// (through its normed bottleneck, or V2-Lite's one matrix), the shared latent and roped key, and
// the latent's per-head key and value maps split (attn_k_b stored transposed, as the converter
// does, so its rows are qk_nope wide).
template <typename Matrix, typename Heads, typename Vec>
void mla_specs(const GenModelShape& s, int l, Matrix matrix, Heads heads, Vec vec) {
  const int64_t q_w = s.n_head * (s.qk_nope + s.qk_rope);
  if (s.q_lora_rank > 0) {
    matrix("attn_q_a.weight", l, s.n_embd, s.q_lora_rank);
    vec("attn_q_a_norm.weight", l, s.q_lora_rank, Init::Norm);
    matrix("attn_q_b.weight", l, s.q_lora_rank, q_w);
  } else {
    matrix("attn_q.weight", l, s.n_embd, q_w);
  }
  matrix("attn_kv_a_mqa.weight", l, s.n_embd, s.kv_lora_rank + s.qk_rope);  // [latent; roped key]
  vec("attn_kv_a_norm.weight", l, s.kv_lora_rank, Init::Norm);
  heads("attn_k_b.weight", l, s.qk_nope, s.kv_lora_rank);  // per head: latent -> nope key, transposed
  heads("attn_v_b.weight", l, s.kv_lora_rank, s.v_head);   // per head: latent -> value
  matrix("attn_output.weight", l, s.n_head * s.v_head, s.n_embd);
}

std::vector<TensorSpec> tensor_specs(const GenModelOptions& o, const GenModelShape& s) {
  const ArchInfo a = arch_info(o.arch);
  const int64_t head_dim = s.head_dim;
  const int n_layer = static_cast<int>(s.n_layer);
  std::vector<TensorSpec> out;
  auto matrix = [&](const std::string& base, int layer, int64_t ne0, int64_t ne1) {
    const std::string name = layer < 0 ? base : fmt::format("blk.{}.{}", layer, base);
    out.push_back({name, gen_tensor_type(o.type, base, layer, n_layer, ne0, o.tied), {ne0, ne1}, Init::Matrix});
  };
  auto f32 = [&](const std::string& base, int layer, std::vector<int64_t> shape, Init init) {
    const std::string name = layer < 0 ? base : fmt::format("blk.{}.{}", layer, base);
    out.push_back({name, DType::F32, std::move(shape), init});
  };
  auto vec = [&](const std::string& base, int layer, int64_t n, Init init) { f32(base, layer, {n}, init); };
  auto stacked = [&](const std::string& base, int layer, int64_t ne0, int64_t ne1, int64_t ne2) {
    const std::string name = fmt::format("blk.{}.{}", layer, base);
    out.push_back({name, gen_tensor_type(o.type, base, layer, n_layer, ne0, o.tied), {ne0, ne1, ne2}, Init::Matrix});
  };
  auto stack = [&](const std::string& base, int layer, int64_t ne0, int64_t ne1) {  // one matrix per expert
    stacked(base, layer, ne0, ne1, s.n_expert);
  };
  auto heads = [&](const std::string& base, int layer, int64_t ne0, int64_t ne1) {  // one matrix per head
    stacked(base, layer, ne0, ne1, s.n_head);
  };

  matrix("token_embd.weight", -1, s.n_embd, s.n_vocab);  // (vocab, embd)
  for (int l = 0; l < n_layer; ++l) {
    vec("attn_norm.weight", l, s.n_embd, Init::Norm);
    if (a.mla)
      mla_specs(s, l, matrix, heads, vec);
    else if (gen_recurrent_layer(s, l))
      delta_net_specs(a, s, o.fused_qkvz, l, matrix, f32);
    else
      attention_specs(a, s, l, matrix, vec);
    if (a.gemma) vec("post_attention_norm.weight", l, s.n_embd, Init::Norm);
    vec(a.gpt_oss || a.delta_net ? "post_attention_norm.weight" : "ffn_norm.weight", l, s.n_embd, Init::Norm);
    ffn_specs(a, s, l, matrix, stack, f32);
    if (a.gemma) vec("post_ffw_norm.weight", l, s.n_embd, Init::Norm);
    if (s.n_embd_per_layer > 0) {  // its gate over its per-layer input, and back to the residual
      matrix("inp_gate.weight", l, s.n_embd, s.n_embd_per_layer);
      matrix("proj.weight", l, s.n_embd_per_layer, s.n_embd);
      vec("post_norm.weight", l, s.n_embd, Init::Norm);
    }
    if (a.gemma4) vec("layer_output_scale.weight", l, 1, Init::LayerScale);
  }
  if (s.n_embd_per_layer > 0) {  // every layer's input: a row per token, and a projection of its embedding
    const int64_t all = s.n_embd_per_layer * s.n_layer;
    matrix("per_layer_token_embd.weight", -1, all, s.n_vocab);
    matrix("per_layer_model_proj.weight", -1, s.n_embd, all);
    vec("per_layer_proj_norm.weight", -1, s.n_embd_per_layer, Init::Norm);
  }
  if (a.phi3) {  // LongRoPE: per-pair frequency divisors, near 1 for the short context, larger for the long
    vec("rope_factors_short.weight", -1, head_dim / 2, Init::RopeShort);
    vec("rope_factors_long.weight", -1, head_dim / 2, Init::RopeLong);
  }
  if (a.gemma4) vec("rope_freqs.weight", -1, head_dim / 2, Init::RopeProportional);
  vec("output_norm.weight", -1, s.n_embd, Init::Norm);
  if (!o.tied) matrix("output.weight", -1, s.n_embd, s.n_vocab);
  return out;
}

// The window: as asked, else the family's (Gemma 3: 512, gpt-oss: 128) where the context is at
// least 4096, else an eighth of the context, so that a tiny model's prompts reach past it.
int64_t gen_sliding_window(const GenModelOptions& o, const GenModelShape& s) {
  if (o.sliding_window > 0) return o.sliding_window;
  return s.n_ctx >= 4096 ? (arch_info(o.arch).gpt_oss ? 128 : 512) : std::max<int64_t>(1, s.n_ctx / 8);
}

// DeepSeek's keys as its converter writes them: attention as llama.cpp's absorbed form sees it (one
// KV head: the latent and the roped key as K, the latent as V), the heads' own sizes as the *_mla
// lengths, and V3's routing: 2.5 times the normalised sigmoid scores of the chosen experts.
void add_mla_metadata(gguf::Writer& w, const std::string& p, const GenModelShape& s) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  // Required by llama.cpp unless the layer count is one of V2-Lite's (26, 27): 0 there means attn_q.
  w.set_u32(p + ".attention.q_lora_rank", u32(s.q_lora_rank));
  w.set_u32(p + ".attention.kv_lora_rank", u32(s.kv_lora_rank));
  w.set_u32(p + ".attention.key_length", u32(s.kv_lora_rank + s.qk_rope));
  w.set_u32(p + ".attention.value_length", u32(s.kv_lora_rank));
  w.set_u32(p + ".attention.key_length_mla", u32(s.qk_nope + s.qk_rope));  // present: llama.cpp's is_mla
  w.set_u32(p + ".attention.value_length_mla", u32(s.v_head));
  w.set_u32(p + ".leading_dense_block_count", u32(s.n_dense_lead));
  w.set_u32(p + ".expert_shared_count", u32(s.n_expert_shared));
  w.set_f32(p + ".expert_weights_scale", 2.5f);  // routed_scaling_factor
  w.set_bool(p + ".expert_weights_norm", true);  // norm_topk_prob
  w.set_u32(p + ".expert_gating_func", 2);       // LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (scoring_func)
  if (s.n_expert_groups > 0) {
    w.set_u32(p + ".expert_group_count", u32(s.n_expert_groups));    // n_group
    w.set_u32(p + ".expert_group_used_count", u32(s.n_group_used));  // topk_group
  }
}

// IMRoPE's sections for n_rot rotated features: their n_rot / 2 pairs split three ways as Qwen
// 3.5's mrope_section splits its 32 ([11, 11, 10]), the fourth 0. llama.cpp gives a text token its
// position in the first three and 0 in the fourth, and interleaves them (pair i takes section i % 3
// while i < 3 * that section's size); with this split every pair takes the text position, so the
// rotation is NeoX's over the first n_rot features.
std::vector<int32_t> gen_rope_sections(int64_t n_rot) {
  const auto pairs = static_cast<int32_t>(n_rot / 2);
  const int32_t w = pairs / 3, h = (pairs - w) / 2;
  return {pairs - h - w, h, w, 0};
}

// Qwen 3.5's keys as its converter writes them: the linear layers' sizes in the ssm.* keys of
// Mamba's files (state_size: the head width, group_count: the key heads, time_step_rank: the value
// heads, inner_size: all value heads' width), the layer pattern and IMRoPE's sections.
void add_delta_net_metadata(gguf::Writer& w, const std::string& p, const GenModelShape& s, bool rope_sections) {
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.set_u32(p + ".ssm.conv_kernel", u32(s.conv_kernel));
  w.set_u32(p + ".ssm.state_size", u32(s.lin_head_dim));
  w.set_u32(p + ".ssm.group_count", u32(s.lin_k_heads));
  w.set_u32(p + ".ssm.time_step_rank", u32(s.lin_v_heads));
  w.set_u32(p + ".ssm.inner_size", u32(s.lin_v_heads * s.lin_head_dim));
  w.set_u32(p + ".full_attention_interval", u32(s.full_attn_interval));
  if (rope_sections) w.set_i32_array(p + ".rope.dimension_sections", gen_rope_sections(s.n_rot));
}

void add_metadata(gguf::Writer& w, const GenModelOptions& o, const GenModelShape& s) {
  const ArchInfo a = arch_info(o.arch);
  const std::string& p = o.arch;  // key prefix
  const uint32_t head_dim = static_cast<uint32_t>(s.head_dim);
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };

  w.set_string("general.architecture", o.arch);
  w.set_string("general.name", o.name.empty() ? fmt::format("weft-{}-{}-{}", o.preset, o.arch, o.type) : o.name);
  w.set_u32("general.alignment", kAlignment);
  w.set_u32("general.file_type", gen_file_type(o.type));
  if (o.type != "f32" && o.type != "f16" && o.type != "bf16") w.set_u32("general.quantization_version", kQuantVersion);
  w.set_u32(p + ".context_length", u32(s.n_ctx));
  w.set_u32(p + ".embedding_length", u32(s.n_embd));
  w.set_u32(p + ".block_count", u32(s.n_layer));
  if (s.n_kv_shared > 0) {  // one width per layer, as Gemma 4 E2B's converter writes them
    std::vector<int32_t> ff(s.n_layer);
    for (int l = 0; l < static_cast<int>(s.n_layer); ++l) ff[l] = static_cast<int32_t>(gen_layer_ff(s, l));
    w.set_i32_array(p + ".feed_forward_length", ff);
  } else {
    w.set_u32(p + ".feed_forward_length", u32(o.arch == "llama" && s.n_expert > 0 ? s.n_ff_exp : s.n_ff));
  }
  if (s.n_expert > 0) {
    w.set_u32(p + ".expert_count", u32(s.n_expert));
    w.set_u32(p + ".expert_used_count", u32(s.n_expert_used));
    if (o.arch != "llama") w.set_u32(p + ".expert_feed_forward_length", u32(s.n_ff_exp));
    if (a.shared_expert && !a.mla) w.set_u32(p + ".expert_shared_feed_forward_length", u32(s.n_ff_shexp));
  }
  w.set_u32(p + ".attention.head_count", u32(s.n_head));
  if (a.gemma4 && s.n_head_kv_swa > 0 && s.n_head_kv_swa != s.n_head_kv) {  // one per layer, as its converter
    std::vector<int32_t> kv(s.n_layer);
    for (int l = 0; l < static_cast<int>(s.n_layer); ++l) kv[l] = static_cast<int32_t>(gen_layer_heads(a, s, l).second);
    w.set_i32_array(p + ".attention.head_count_kv", kv);
  } else {
    w.set_u32(p + ".attention.head_count_kv", u32(s.n_head_kv));
  }
  if (a.mla) {
    add_mla_metadata(w, p, s);
  } else if (a.qk_norm || s.head_dim * s.n_head != s.n_embd) {  // qwen3 states its head size, as any odd one is
    w.set_u32(p + ".attention.key_length", head_dim);
    w.set_u32(p + ".attention.value_length", head_dim);
  }
  w.set_u32(p + ".rope.dimension_count", u32(s.n_rot));
  w.set_f32(p + ".rope.freq_base", a.rope_freq_base);
  if (a.delta_net) add_delta_net_metadata(w, p, s, !a.qwen3next);
  if (a.gpt_oss) w.set_u32(p + ".attention.sliding_window", u32(gen_sliding_window(o, s)));  // pattern: 2
  if (a.gemma) {
    w.set_u32(p + ".attention.sliding_window", u32(gen_sliding_window(o, s)));
    // Released Gemma 3 files leave it to llama.cpp's default (6); a model of fewer layers has
    // every other layer global, so both kinds are in it.
    if (a.gemma4) {  // as Gemma 4's converter writes them
      std::vector<bool> swa(s.n_layer);
      for (int l = 0; l < static_cast<int>(s.n_layer); ++l) swa[l] = gen_swa_layer(s, l);
      w.set_bool_array(p + ".attention.sliding_window_pattern", swa);
      const uint32_t head_dim_swa = u32(s.head_dim_swa > 0 ? s.head_dim_swa : s.head_dim);
      w.set_u32(p + ".attention.key_length_swa", head_dim_swa);
      w.set_u32(p + ".attention.value_length_swa", head_dim_swa);
      w.set_u32(p + ".rope.dimension_count_swa", head_dim_swa);
      w.set_u32(p + ".embedding_length_per_layer_input", u32(s.n_embd_per_layer));
      w.set_u32(p + ".attention.shared_kv_layers", u32(s.n_kv_shared));
      w.set_f32(p + ".final_logit_softcapping", 30.0f);
    } else if (s.n_layer < 6) {
      w.set_u32(p + ".attention.sliding_window_pattern", 2);
    }
  }
  if (o.rope_scaling == "yarn" || (a.gpt_oss && o.rope_scaling.empty())) {  // gpt-oss: always YaRN
    w.set_string(p + ".rope.scaling.type", "yarn");
    w.set_f32(p + ".rope.scaling.factor", static_cast<float>(o.rope_factor));
    w.set_u32(p + ".rope.scaling.original_context_length",
              u32(o.yarn_orig_ctx > 0 ? o.yarn_orig_ctx : std::max<int64_t>(1, s.n_ctx / 4)));
    // V3's mscale_all_dim (1) as its converter writes it, times 0.1 (llama.cpp divides that back out)
    if (a.mla) w.set_f32(p + ".rope.scaling.yarn_log_multiplier", 0.1f);
  } else if (!o.rope_scaling.empty()) {
    fail("gen-model", "rope scaling '{}': yarn or none", o.rope_scaling);
  }
  if (a.phi3) {  // Phi-3.5-mini's LongRoPE: the factors switch beyond the original context
    w.set_string(p + ".rope.scaling.type", "longrope");
    w.set_u32(p + ".rope.scaling.original_context_length", u32(std::max<int64_t>(1, s.n_ctx / 2)));
    w.set_f32(p + ".rope.scaling.attn_factor", 1.1902380714238083f);
  }
  w.set_f32(p + ".attention.layer_norm_rms_epsilon", a.rms_eps);
  w.set_u32(p + ".vocab_size", u32(s.n_vocab));

  // The family's own control tokens, as its tokenizer has them (llama.cpp looks Phi-3's up by text).
  std::vector<std::string> control = o.control_tokens;
  std::vector<std::string> family;
  if (a.phi3) family = {"<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"};
  if (a.gemma) family = {"<start_of_turn>", "<end_of_turn>"};
  if (a.gpt_oss) family = {"<|start|>", "<|message|>", "<|end|>", "<|return|>", "<|channel|>", "<|call|>"};
  for (const auto& t : family)
    if (std::find(control.begin(), control.end(), t) == control.end()) control.push_back(t);
  GenVocab v = gen_vocab(s.n_vocab, control);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  if (!o.chat_template.empty()) w.set_string("tokenizer.chat_template", o.chat_template);
}

// Builds the writer; tensors are filled lazily (during write) on `pool`, which must outlive it.
gguf::Writer build_writer(const GenModelOptions& o, ThreadPool& pool) {
  const GenModelShape s = gen_model_shape(o);
  gguf::Writer w;
  add_metadata(w, o, s);
  const uint64_t base_seed = [&] {
    uint64_t st = o.seed;
    return splitmix64(st);
  }();
  for (TensorSpec& t : tensor_specs(o, s)) {
    const uint64_t seed = base_seed ^ fnv1a64(t.name);
    int64_t n_rows = 1;  // every row of every stacked matrix
    for (size_t i = 1; i < t.shape.size(); ++i) n_rows *= t.shape[i];
    const int64_t ne0 = t.shape[0];
    const size_t row_bytes_t = row_bytes(t.type, ne0);
    const DType type = t.type;
    const Init init = t.init;
    auto fill = [&pool, seed, ne0, n_rows, row_bytes_t, type, init](uint8_t* dst, size_t n_bytes) {
      WEFT_ASSERT(n_bytes == row_bytes_t * static_cast<size_t>(n_rows));
      pool.parallel_for(n_rows, 1, [&](int64_t b, int64_t e) {
        std::vector<float> row(static_cast<size_t>(ne0));
        for (int64_t r = b; r < e; ++r) {
          gen_row(seed, r, init, row.data(), ne0);
          encode_row(type, row.data(), dst + static_cast<size_t>(r) * row_bytes_t, ne0);
        }
      });
    };
    w.add_tensor(t.name, t.type, t.shape, gguf::Writer::Fill(fill));
  }
  return w;
}

int pool_threads(const GenModelOptions& o) { return o.n_threads > 0 ? o.n_threads : hardware_cores(); }

// DeepSeek's shape as llama.cpp loads it; sets the sizes that follow from it (head_dim: the q / k
// head, qk_nope + qk_rope; the shared experts' width).
void check_mla_shape(GenModelShape& s, const GenModelShape& overrides) {
  if (s.kv_lora_rank <= 0)
    fail("gen-model", "arch deepseek2 needs a latent-attention shape: --preset tiny-moe or deepseek-mini");
  if (overrides.head_dim != 0 || s.n_head_kv != 1)
    fail("gen-model",
         "deepseek2's heads are qk_nope + qk_rope wide over one latent KV head (no --head-dim, --n-head-kv)");
  if (s.qk_nope <= 0 || s.qk_rope <= 0 || s.qk_rope % 2 != 0 || s.v_head <= 0)
    fail("gen-model", "deepseek2 head sizes: qk_nope {} and v_head {} must be positive, qk_rope {} positive and even",
         s.qk_nope, s.v_head, s.qk_rope);
  if (s.n_dense_lead < 0 || s.n_dense_lead > s.n_layer || s.n_expert_shared <= 0)
    fail("gen-model", "deepseek2: {} leading dense layers of {}, {} shared experts (llama.cpp needs at least one)",
         s.n_dense_lead, s.n_layer, s.n_expert_shared);
  if (s.n_expert_groups != 0) {  // llama.cpp's asserts, and a group is scored by its best two experts
    const int64_t per_group = s.n_expert_groups > 0 ? s.n_expert / s.n_expert_groups : 0;
    if (per_group == 0 || s.n_expert % s.n_expert_groups != 0 || per_group < 2 || s.n_group_used <= 0 ||
        (s.n_expert_groups > 1 && s.n_group_used >= s.n_expert_groups) || s.n_expert_used > s.n_group_used * per_group)
      fail("gen-model", "expert groups: {} used of {} over {} experts ({} used) do not fit", s.n_group_used,
           s.n_expert_groups, s.n_expert, s.n_expert_used);
  }
  s.head_dim = s.qk_nope + s.qk_rope;
  s.n_ff_shexp = s.n_ff_exp * s.n_expert_shared;
}

// Qwen 3.5's linear layers as llama.cpp loads them (one head width for keys and values: it asserts
// head_k_dim == head_v_dim; value heads a multiple of the key heads).
void check_delta_net_shape(const GenModelShape& s, std::string_view arch) {
  if (s.full_attn_interval <= 0 || s.lin_k_heads <= 0 || s.lin_v_heads <= 0 || s.lin_head_dim <= 0)
    fail("gen-model",
         "arch {} needs a Gated DeltaNet shape: --preset tiny, tiny-moe, qwen35-mini, qwen35moe-mini or qwen3next-mini",
         arch);
  if (s.lin_v_heads % s.lin_k_heads != 0)
    fail("gen-model", "{}: {} linear value heads are not a multiple of its {} key heads", arch, s.lin_v_heads,
         s.lin_k_heads);
  if (s.conv_kernel < 2 || s.conv_kernel > 16)
    fail("gen-model", "{}: a conv kernel of {} taps (2..16)", arch, s.conv_kernel);
}

}  // namespace

GenModelShape gen_model_preset(std::string_view preset, std::string_view arch) {
  // Qwen 3.5's hybrid layout (qwen35; qwen35moe with experts): heads head_dim wide (not n_embd /
  // n_head) roped on their first quarter, every 4th layer gated full attention, the others Gated
  // DeltaNet with twice as many value heads as key heads, so that the value heads' tiled order
  // matters. tiny (qwen35): 64 wide, 4 layers, the last full attention (4 heads of 32 over 2 KV heads,
  // 8 features roped), an FFN of 160; linear layers of 2 key and 4 value heads 16 wide, a conv of 4
  // taps. tiny-moe (qwen35moe): the same with 8 experts of 96 (2 used) beside a shared expert of 128.
  // qwen35-mini: Qwen3.5-0.8B's widths (1024, 8 heads of 256 over 2 KV heads, 64 roped, an FFN of
  // 3584) with 8 key and 16 value heads of 128 over 8 layers (3 and 7 full attention) and a 32000
  // vocab; qwen35moe-mini: the same with 32 experts of 512, 4 used, beside a shared expert of 512.
  // qwen3next's tiny-moe and qwen3next-mini are qwen35moe's.
  const bool q35_tiny =
      (preset == "tiny" && arch == "qwen35") || (preset == "tiny-moe" && (arch == "qwen35moe" || arch == "qwen3next"));
  const bool moe_mini = preset == "qwen35moe-mini" || preset == "qwen3next-mini";
  if (q35_tiny || preset == "qwen35-mini" || moe_mini) {
    GenModelShape s = q35_tiny ? GenModelShape{.n_embd = 64,
                                               .n_layer = 4,
                                               .n_ff = 160,
                                               .n_head = 4,
                                               .n_head_kv = 2,
                                               .n_vocab = 320,
                                               .n_ctx = 512,
                                               .head_dim = 32,
                                               .full_attn_interval = 4,
                                               .lin_k_heads = 2,
                                               .lin_v_heads = 4,
                                               .lin_head_dim = 16,
                                               .conv_kernel = 4}
                               : GenModelShape{.n_embd = 1024,
                                               .n_layer = 8,
                                               .n_ff = 3584,
                                               .n_head = 8,
                                               .n_head_kv = 2,
                                               .n_vocab = 32000,
                                               .n_ctx = 4096,
                                               .head_dim = 256,
                                               .full_attn_interval = 4,
                                               .lin_k_heads = 8,
                                               .lin_v_heads = 16,
                                               .lin_head_dim = 128,
                                               .conv_kernel = 4};
    auto experts = [&](int64_t n, int64_t used, int64_t ff_exp, int64_t ff_shexp) {
      s.n_expert = n;
      s.n_expert_used = used;
      s.n_ff_exp = ff_exp;
      s.n_ff_shexp = ff_shexp;
    };
    if (preset == "tiny-moe") experts(8, 2, 96, 128);
    if (moe_mini) experts(32, 4, 512, 512);
    return s;
  }
  // DeepSeek V3's layout (deepseek2): the fields below up to n_ff_exp, n_ff_shexp .. n_kv_shared 0 (the
  // shared experts' width follows from their count), then {q_lora_rank, kv_lora_rank, qk_nope, qk_rope,
  // v_head, n_dense_lead, n_expert_shared, n_expert_groups, n_group_used}. tiny-moe's: 3 layers, the
  // first dense; 4 heads of 32 + 16 (q through 32) over a latent of 64 and a roped key of 16, values 32
  // wide; 8 experts of 96, 2 used, from the best 2 of 4 groups, beside 1 shared; every row a whole
  // number of q8_0 blocks. deepseek-mini: 1024 wide, 8 layers, the first dense (2816); 16 heads of
  // 64 + 32 (q through 512) over a latent of 256, values 64 wide; 32 experts of 256, 4 used, from the
  // best 2 of 4 groups, beside 1 shared; a 32000 vocab: 0.28B parameters. Its rows fill K-quant
  // super-blocks except attn_k_b's (64; V3's are 128), which fall back as llama-quantize's do.
  if (preset == "tiny-moe" && arch == "deepseek2")
    return {64, 3, 192, 4, 1, 320, 512, 8, 2, 96, 0, 0, 0, 0, 0, 0, 32, 64, 32, 16, 32, 1, 1, 4, 2};
  if (preset == "deepseek-mini")
    return {1024, 8, 2816, 16, 1, 32000, 4096, 32, 4, 256, 0, 0, 0, 0, 0, 0, 512, 256, 64, 32, 64, 1, 1, 4, 2};
  // {n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, n_ctx}
  if (preset == "tiny") return {64, 2, 160, 4, 2, 320, 512};
  if (preset == "500m") return {2048, 8, 5632, 32, 8, 32000, 2048};
  if (preset == "1b") return {2048, 16, 8192, 32, 8, 32000, 4096};
  if (preset == "8b-shape") return {4096, 32, 14336, 32, 8, 128256, 8192};  // Llama 3 8B's shape
  // + {n_expert, n_expert_used, n_ff_exp, n_ff_shexp}. tiny-moe: 3 quant blocks per expert width,
  // so a tensor split lands on blocks unevenly. moe-2b: Qwen3-30B-A3B's layer (2048 wide, experts
  // of 768, 8 active) with 32 experts and 12 layers: 2.1B parameters, 0.6B active per token.
  // Gemma 3 1B's shape: heads 256 wide (4 x 256 = 1024 of 1152), one KV head, its 262144 vocab.
  if (preset == "gemma3-1b") return {1152, 26, 6912, 4, 1, 262144, 32768, 0, 0, 0, 0, 256};
  if (preset == "tiny-moe") return {64, 2, 192, 4, 2, 320, 512, 8, 2, 96, 128};
  if (preset == "moe-2b") return {2048, 12, 6144, 32, 4, 32000, 4096, 32, 8, 768, 2048};
  // gpt-oss-20b's layer (2880 wide, 64 heads of 64 over 8 KV heads, experts 2880 wide, 4 active,
  // its 201088 vocab) with 16 experts over 4 layers: 2.9B parameters, 1.1B read per token.
  if (preset == "gpt-oss-mini") return {2880, 4, 2880, 64, 8, 201088, 8192, 16, 4, 2880, 0, 64};
  // Gemma 4 26B-A4B's layer (2816 wide, 16 heads: 512 wide over 2 KV heads on its global layers,
  // 256 over 8 on the sliding-window ones; a dense FFN of 2112 beside 128 experts of 704, 8 active;
  // its 262144 vocab) over 6 layers, five sliding-window and a global one: 6.4B parameters, 1.4B
  // read per token.
  if (preset == "gemma4-a4b-mini") return {2816, 6, 2112, 16, 2, 262144, 8192, 128, 8, 704, 0, 512, 256, 8};
  // + {n_embd_per_layer, n_kv_shared}. Gemma 4 E2B's layer (1536 wide, 8 heads: 512 wide on its
  // global layers, 256 on the sliding-window ones, one KV head; an FFN of 6144, twice that in the
  // layers over an earlier layer's cache; inputs of 256 per layer; its 262144 vocab) over 12
  // layers, the last 6 over the caches of layers 4 and 5.
  if (preset == "gemma4-e2b-mini") return {1536, 12, 6144, 8, 1, 262144, 8192, 0, 0, 0, 0, 512, 256, 1, 256, 6};
  fail("gen-model",
       "unknown preset '{}' (tiny, 500m, 1b, 8b-shape, gemma3-1b, tiny-moe, moe-2b, gpt-oss-mini, gemma4-a4b-mini, "
       "gemma4-e2b-mini, deepseek-mini, qwen35-mini, qwen35moe-mini, qwen3next-mini)",
       preset);
}

GenModelShape gen_model_shape(const GenModelOptions& o) {
  GenModelShape s = gen_model_preset(o.preset, o.arch);
  const GenModelShape& v = o.overrides;
  auto take = [](int64_t& dst, int64_t src) {
    if (src != 0) dst = src;
  };
  take(s.n_embd, v.n_embd);
  take(s.n_layer, v.n_layer);
  take(s.n_ff, v.n_ff);
  take(s.n_head, v.n_head);
  take(s.n_head_kv, v.n_head_kv);
  take(s.n_vocab, v.n_vocab);
  take(s.n_ctx, v.n_ctx);
  take(s.n_ctx, o.n_ctx);
  take(s.n_expert, v.n_expert);
  take(s.n_expert_used, v.n_expert_used);
  take(s.n_ff_exp, v.n_ff_exp);
  take(s.n_ff_shexp, v.n_ff_shexp);
  take(s.head_dim, v.head_dim);
  take(s.head_dim_swa, v.head_dim_swa);
  take(s.n_head_kv_swa, v.n_head_kv_swa);
  take(s.n_embd_per_layer, v.n_embd_per_layer);
  take(s.n_kv_shared, v.n_kv_shared);
  take(s.q_lora_rank, v.q_lora_rank);
  if (s.q_lora_rank < 0) s.q_lora_rank = 0;  // -1: none asked for
  take(s.kv_lora_rank, v.kv_lora_rank);
  take(s.qk_nope, v.qk_nope);
  take(s.qk_rope, v.qk_rope);
  take(s.v_head, v.v_head);
  take(s.n_dense_lead, v.n_dense_lead);
  take(s.n_expert_shared, v.n_expert_shared);
  take(s.n_expert_groups, v.n_expert_groups);
  take(s.n_group_used, v.n_group_used);
  take(s.n_rot, v.n_rot);
  take(s.full_attn_interval, v.full_attn_interval);
  take(s.lin_k_heads, v.lin_k_heads);
  take(s.lin_v_heads, v.lin_v_heads);
  take(s.lin_head_dim, v.lin_head_dim);
  take(s.conv_kernel, v.conv_kernel);
  const ArchInfo a = arch_info(o.arch);
  if (a.mla)
    check_mla_shape(s, v);
  else if (s.kv_lora_rank != 0 || s.q_lora_rank != 0 || s.n_dense_lead != 0 || s.n_expert_groups != 0)
    fail("gen-model", "latent attention, leading dense layers and expert groups are DeepSeek's (--arch deepseek2)");
  if (a.delta_net)
    check_delta_net_shape(s, o.arch);
  else if (s.full_attn_interval != 0 || s.lin_k_heads != 0 || s.lin_v_heads != 0 || s.lin_head_dim != 0 ||
           s.conv_kernel != 0)
    fail("gen-model", "Gated DeltaNet layers are Qwen 3.5's and Qwen3-Next's (--arch qwen35, qwen35moe, qwen3next)");
  if (o.fused_qkvz && !a.qwen3next)
    fail("gen-model", "--fused-qkvz (ssm_in) is Qwen3-Next's older layout (--arch qwen3next)");
  if (s.n_expert > 0 && a.ffn == ArchInfo::Ffn::Dense)
    fail("gen-model", "arch {} has no experts: use qwen2moe / qwen3moe (or llama for Mixtral) with preset {}", o.arch,
         o.preset);
  if (s.n_expert == 0 && a.ffn == ArchInfo::Ffn::Experts)
    fail("gen-model", "arch {} is a mixture of experts: use an MoE preset (tiny-moe, moe-2b, gpt-oss-mini)", o.arch);
  if (s.n_expert > 0 && (s.n_expert_used < 1 || s.n_expert_used > s.n_expert || s.n_ff_exp <= 0 ||
                         (a.shared_expert && s.n_ff_shexp <= 0)))
    fail("gen-model", "experts: {} used of {}, {} wide, shared {} wide", s.n_expert_used, s.n_expert, s.n_ff_exp,
         s.n_ff_shexp);
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ctx <= 0)
    fail("gen-model", "dimensions must be positive (embd {}, layers {}, ff {}, heads {}/{}, ctx {})", s.n_embd,
         s.n_layer, s.n_ff, s.n_head, s.n_head_kv, s.n_ctx);
  if (s.head_dim == 0) {
    if (s.n_embd % s.n_head != 0) fail("gen-model", "n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head);
    s.head_dim = s.n_embd / s.n_head;
  }
  if (s.n_head % s.n_head_kv != 0)
    fail("gen-model", "n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv);
  // DeepSeek ropes its qk_rope part, Qwen 3.5 a quarter of each head (partial_rotary_factor 0.25)
  const int64_t default_rot = a.mla ? s.qk_rope : a.delta_net ? s.head_dim / 4 : s.head_dim;
  if (s.n_rot == 0) s.n_rot = default_rot;
  if (s.n_rot != default_rot && !a.delta_net)
    fail("gen-model", "a partial rotary embedding (n_rot {} of {}) is Qwen 3.5's (--arch qwen35)", s.n_rot,
         default_rot);
  if (s.n_rot <= 0 || s.n_rot % 2 != 0 || s.n_rot > s.head_dim)
    fail("gen-model", "n_rot {} must be even and within the head ({})", s.n_rot, s.head_dim);
  if (a.phi3 && !o.rope_scaling.empty()) fail("gen-model", "phi3 has its own rope scaling (LongRoPE)");
  if (a.gpt_oss && o.tied) fail("gen-model", "gpt-oss has an output matrix of its own (llama.cpp requires it)");
  if (!o.rope_scaling.empty() && !(o.rope_factor > 1 && o.rope_factor < 1e6))
    fail("gen-model", "rope factor {} must be over 1", o.rope_factor);
  if (a.phi3 && s.head_dim * s.n_head != s.n_embd)  // llama.cpp's phi3 reads q/k/v n_embd wide
    fail("gen-model", "phi3's heads must fill n_embd ({} x {} is not {})", s.n_head, s.head_dim, s.n_embd);
  for (int64_t hd : {s.head_dim, s.head_dim_swa})
    if (hd % 2 != 0 || hd < 0 || hd > 512) fail("gen-model", "head size {} must be even (RoPE) and at most 512", hd);
  if ((s.head_dim_swa > 0 || s.n_head_kv_swa > 0) && !a.gemma4)
    fail("gen-model", "per-layer heads (--head-dim-swa, --n-head-kv-swa) are Gemma 4's (--arch gemma4)");
  if ((s.n_embd_per_layer > 0 || s.n_kv_shared > 0) && !a.gemma4)
    fail("gen-model", "per-layer inputs and KV-sharing layers are Gemma 4 E2B/E4B's (--arch gemma4)");
  if (s.n_embd_per_layer < 0 || s.n_embd_per_layer > 4096)
    fail("gen-model", "per-layer input width {} is out of range (0..4096)", s.n_embd_per_layer);
  if (s.n_kv_shared > 0) {  // the two layers before them, sliding-window then global, hold the caches they read
    const int first = static_cast<int>(s.n_layer - s.n_kv_shared);
    if (s.n_kv_shared >= s.n_layer - 1 || !gen_swa_layer(s, first - 2) || gen_swa_layer(s, first - 1))
      fail("gen-model", "{} KV-sharing layers of {}: the two before them must be a sliding-window and a global one",
           s.n_kv_shared, s.n_layer);
    if (s.n_expert > 0) fail("gen-model", "KV-sharing layers are E2B/E4B's, which have no experts");
  }
  if (s.n_head_kv_swa < 0 || (s.n_head_kv_swa > 0 && s.n_head % s.n_head_kv_swa != 0))
    fail("gen-model", "n_head {} is not a multiple of n_head_kv_swa {}", s.n_head, s.n_head_kv_swa);
  if (s.n_vocab < kMinVocab)
    fail("gen-model", "vocab {} is smaller than the {} special and byte tokens", s.n_vocab, kMinVocab);
  if (s.n_vocab > INT32_MAX || s.n_embd > UINT32_MAX || s.n_ff > UINT32_MAX || s.n_ctx > UINT32_MAX)
    fail("gen-model", "a dimension does not fit the GGUF u32 key");
  return s;
}

uint32_t gen_file_type(std::string_view type) {
  // llama_ftype numbers. The pure K types have no ftype of their own; they are recorded as the
  // nearest "_S" mix (the types of the bulk of the weights). mxfp4 is MOSTLY_MXFP4_MOE (38).
  struct Entry {
    std::string_view name;
    uint32_t ftype;
  };
  static constexpr Entry kTable[] = {
      {"f32", 0},     {"f16", 1},     {"q4_0", 2},  {"q4_1", 3},    {"q8_0", 7},    {"q5_0", 8},
      {"q5_1", 9},    {"q2_k", 10},   {"q3_k", 11}, {"q4_k", 14},   {"q5_k", 16},   {"q6_k", 18},
      {"q4_k_m", 15}, {"q5_k_m", 17}, {"bf16", 32}, {"iq4_nl", 25}, {"iq4_xs", 30}, {"mxfp4", 38},
  };
  for (const auto& e : kTable)
    if (e.name == type) return e.ftype;
  fail("gen-model",
       "unknown type '{}' (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q4_k_m q5_k_m iq4_nl iq4_xs "
       "mxfp4)",
       type);
}

DType gen_tensor_type(std::string_view type, std::string_view tensor, int layer, int n_layer, int64_t row_len,
                      bool tied) {
  gen_file_type(type);  // validates the name
  const bool mix = type == "q4_k_m" || type == "q5_k_m";
  DType t = type == "q4_k_m" ? DType::Q4_K : type == "q5_k_m" ? DType::Q5_K : *dtype_from_name(type);
  // llama_tensor_get_type for MXFP4_MOE: the expert stacks MXFP4, every other matrix Q8_0.
  if (type == "mxfp4" && tensor.find("_exps.") == std::string_view::npos) t = DType::Q8_0;
  if (mix) {
    // llama_tensor_get_type for Q4_K_M / Q5_K_M; with tied embeddings token_embd is the output.
    if (tensor == "output.weight" || (tied && tensor == "token_embd.weight"))
      t = DType::Q6_K;
    else if ((tensor == "attn_v.weight" || tensor.starts_with("ffn_down")) && use_more_bits(layer, n_layer))
      t = DType::Q6_K;
  }
  if (block_size(t) == kQkK && row_len % kQkK != 0) {
    // llama.cpp's fallback for rows that do not fill a super-block: a 32-value type of about
    // the same size (IQ4_NL for the types below 4 bits and for IQ4_XS).
    if (t == DType::Q2_K || t == DType::Q3_K || t == DType::IQ4_XS)
      t = DType::IQ4_NL;
    else if (t == DType::Q4_K)
      t = DType::Q5_0;
    else if (t == DType::Q5_K)
      t = DType::Q5_1;
    else if (t == DType::Q6_K)
      t = DType::Q8_0;
  }
  if (row_len % block_size(t) != 0) t = DType::F16;
  return t;
}

GenVocab gen_vocab(int64_t n_vocab, const std::vector<std::string>& control_tokens) {
  if (n_vocab < kMinVocab) fail("gen-model", "vocab {} is smaller than {}", n_vocab, kMinVocab);
  std::vector<std::string> controls;
  for (const std::string& c : control_tokens) {
    if (c.empty()) fail("gen-model", "an empty control token");
    const bool known = c == "<unk>" || c == "<s>" || c == "</s>";
    if (!known && std::find(controls.begin(), controls.end(), c) == controls.end()) controls.push_back(c);
  }
  if (kMinVocab + static_cast<int64_t>(controls.size()) > n_vocab)
    fail("gen-model", "vocab {} has no room for {} control tokens", n_vocab, controls.size());
  GenVocab v;
  auto add = [&](std::string tok, float score, int32_t type) {
    v.tokens.push_back(std::move(tok));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  // llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte.
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, 6);

  // Pieces, most useful first: SPM merges prefer higher scores, and small vocabs keep a prefix.
  const std::string sp = "\xE2\x96\x81";  // U+2581, SentencePiece's word-start marker
  std::vector<std::string> pieces = {sp};
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(sp + c);
  for (std::string_view p : {".", ",", "'", "-", "!", "?", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"})
    pieces.emplace_back(p);
  for (char c = 'A'; c <= 'Z'; ++c) pieces.push_back(sp + c);
  for (std::string_view bg : {"th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te",
                              "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou",
                              "io", "le", "ve", "co", "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce"})
    pieces.emplace_back(bg);
  for (std::string_view w :
       {"the",   "of",    "and",   "to",     "in",    "is",   "it",    "that",  "was",   "for",  "on",    "are",
        "as",    "with",  "his",   "they",   "at",    "be",   "this",  "have",  "from",  "or",   "one",   "had",
        "by",    "word",  "but",   "not",    "what",  "all",  "were",  "we",    "when",  "your", "can",   "said",
        "there", "use",   "an",    "each",   "which", "she",  "do",    "how",   "their", "if",   "will",  "up",
        "other", "about", "out",   "many",   "then",  "them", "these", "so",    "some",  "her",  "would", "make",
        "like",  "him",   "into",  "time",   "has",   "look", "two",   "more",  "write", "go",   "see",   "number",
        "no",    "way",   "could", "people", "my",    "than", "first", "water", "been",  "call", "who",   "now",
        "find",  "long",  "down",  "day",    "did",   "get",  "come",  "made",  "may",   "part", "hello", "world",
        "once",  "upon",  "story", "little"})
    pieces.push_back(sp + std::string(w));

  // A control token's text is never also a piece (chatglm3's "sop" would be one).
  std::erase_if(pieces,
                [&](const std::string& p) { return std::find(controls.begin(), controls.end(), p) != controls.end(); });
  std::unordered_set<std::string> seen(pieces.begin(), pieces.end());
  seen.insert(controls.begin(), controls.end());
  const size_t want = static_cast<size_t>(n_vocab) - v.tokens.size() - controls.size();
  // Then every lowercase string of length 2, 3, ... (plain and word-initial) until the vocab is
  // full: 4 letters already give ~950k pieces, far beyond any preset.
  std::string s;
  for (int len = 2; pieces.size() < want; ++len) {
    std::vector<int> digits(len, 0);
    for (bool more = true; more && pieces.size() < want;) {
      s.assign(len, 'a');
      for (int i = 0; i < len; ++i) s[i] = static_cast<char>('a' + digits[i]);
      for (const std::string& cand : {s, sp + s})
        if (pieces.size() < want && seen.insert(cand).second) pieces.push_back(cand);
      int i = len - 1;
      while (i >= 0 && ++digits[i] == 26) digits[i--] = 0;
      more = i >= 0;
    }
  }
  pieces.resize(want);
  for (size_t i = 0; i < pieces.size(); ++i) add(pieces[i], -static_cast<float>(i), 1);
  for (const std::string& c : controls) add(c, 0, 3);
  return v;
}

std::vector<std::string> generate_model(const GenModelOptions& o) {
  if (o.path.empty()) fail("gen-model", "no output path");
  ThreadPool pool(pool_threads(o), {}, /*spin=*/false);
  const gguf::Writer w = build_writer(o, pool);
  if (o.split_max_tensors == 0) {
    w.write(o.path);
    return {o.path};
  }
  const bool ext = o.path.size() > 5 && o.path.compare(o.path.size() - 5, 5, ".gguf") == 0;
  return w.write_split(ext ? o.path.substr(0, o.path.size() - 5) : o.path, o.split_max_tensors);
}

std::vector<uint8_t> generate_model_bytes(const GenModelOptions& o) {
  ThreadPool pool(pool_threads(o), {}, /*spin=*/false);
  return build_writer(o, pool).to_bytes();
}

}  // namespace weft::tools
