// `weft gen-model`: writes a deterministic random-weight model as a GGUF file that llama.cpp
// loads (llama / qwen2 / qwen3 / qwen2moe / qwen3moe / gemma3 / gemma4 / phi3 / gpt-oss / deepseek2 / qwen35 /
// qwen35moe keys and tensor names, an SPM "llama" vocab), so equality tests and benchmarks never need a download. Same
// options -> same bytes, whatever the thread count.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::tools {

// Shape of a preset; fields of GenModelOptions override single values.
struct GenModelShape {
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  // Mixture of experts (n_expert 0: dense). Mixtral (llama) writes n_ff_exp as its
  // feed_forward_length; the qwen MoEs write n_ff there and n_ff_exp as expert_feed_forward_length.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;  // qwen2moe's shared expert
  int64_t head_dim = 0;    // 0: n_embd / n_head (Gemma 3's heads are 256 wide whatever n_embd)
  // Gemma 4: the sliding-window layers' head size and KV heads where they differ from the global
  // layers' (head_dim, n_head_kv), as its released files have them; 0: the same.
  int64_t head_dim_swa = 0;
  int64_t n_head_kv_swa = 0;
  // Gemma 4 E2B/E4B: each layer's input width from the per-layer embeddings (0: none), and how
  // many last layers attend over an earlier layer's KV cache, their FFN twice as wide (E2B's).
  int64_t n_embd_per_layer = 0;
  int64_t n_kv_shared = 0;
  // DeepSeek V2/V3 (deepseek2) multi-head latent attention: the query through a q_lora_rank-wide
  // normed bottleneck (0: straight from n_embd, V2-Lite's attn_q; -1 in overrides asks for that),
  // heads of qk_nope + qk_rope; keys and values from one kv_lora_rank-wide latent per token beside a
  // qk_rope-wide roped key shared by all heads; value heads v_head wide. head_dim becomes
  // qk_nope + qk_rope; n_head_kv must be 1 (its converter writes 1: one latent for all heads).
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope = 0;
  int64_t qk_rope = 0;
  int64_t v_head = 0;
  // Its feed-forward: the first n_dense_lead layers dense (n_ff wide), the others n_expert_shared
  // shared experts (n_ff_shexp = n_ff_exp * n_expert_shared) beside the routed ones, which are
  // chosen among the n_group_used best of n_expert_groups groups (0: no groups).
  int64_t n_dense_lead = 0;
  int64_t n_expert_shared = 0;
  int64_t n_expert_groups = 0;
  int64_t n_group_used = 0;
  // RoPE turns the first n_rot features of each head (0: all of head_dim; Qwen 3.5: a quarter).
  int64_t n_rot = 0;
  // Qwen 3.5 (qwen35, qwen35moe): every full_attn_interval-th layer is gated full attention, the
  // others Gated DeltaNet linear attention: lin_k_heads query/key heads and lin_v_heads value heads
  // (a multiple of them; value head h reads key head h % lin_k_heads), all lin_head_dim wide, after
  // a causal convolution of conv_kernel taps.
  int64_t full_attn_interval = 0;
  int64_t lin_k_heads = 0;
  int64_t lin_v_heads = 0;
  int64_t lin_head_dim = 0;
  int64_t conv_kernel = 0;
  int64_t q_width() const { return n_head * head_dim; }
};

struct GenModelOptions {
  std::string path;  // output .gguf (generate_model only)
  // tiny, 500m, 1b, 8b-shape, gemma3-1b, qwen35-mini (qwen35 only); mixtures of experts: tiny-moe,
  // moe-2b, gpt-oss-mini, deepseek-mini (deepseek2 only), qwen35moe-mini (qwen35moe only),
  // qwen3next-mini (qwen3next only). tiny with qwen35 and tiny-moe with deepseek2 / qwen35moe /
  // qwen3next take those archs' own tiny shapes.
  std::string preset = "tiny";
  // f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k (every matrix in that type), or the
  // llama.cpp mixes q4_k_m / q5_k_m and mxfp4 (gen_tensor_type). Norms and biases are always f32.
  std::string type = "q8_0";
  uint64_t seed = 42;
  // llama, qwen2 (q/k/v biases), qwen3 (q/k head norms), gemma3, gemma4, phi3; with an MoE preset: llama
  // (Mixtral's layout), qwen2moe (plus a shared expert), qwen3moe, gpt-oss, deepseek2 (DeepSeek V3's
  // latent attention and sigmoid-scored grouped routing, its split attn_k_b / attn_v_b); qwen35 (Qwen
  // 3.5: Gated DeltaNet layers between gated full-attention ones) and with an MoE preset qwen35moe
  // (plus routed experts beside a sigmoid-gated shared expert); qwen3next (Qwen3-Next: qwen35moe's
  // layers with the value heads grouped by key head, beta and alpha in one ssm_ba).
  std::string arch = "llama";
  bool tied = false;           // no output.weight: logits reuse token_embd.weight
  bool fused_qkvz = false;     // qwen3next: its older files' ssm_in (q, k, v, z per key head)
  int64_t sliding_window = 0;  // gemma3, gemma4: the window of its local layers; 0: 512, or n_ctx / 8 below 4096
  // "yarn" (Qwen's long-context files): rope.scaling.type, .factor and .original_context_length
  // (yarn_orig_ctx; 0: a quarter of the context) written as their converter writes them; deepseek2
  // also .yarn_log_multiplier 0.1 (V3's mscale_all_dim 1, times the 0.1 its converter applies).
  std::string rope_scaling;
  double rope_factor = 4.0;
  int64_t yarn_orig_ctx = 0;
  int64_t n_ctx = 0;        // 0: the preset's context length
  GenModelShape overrides;  // non-zero fields replace the preset's (tests, odd shapes)
  int n_threads = 0;        // 0: all cores; the output does not depend on it
  std::string name;         // general.name; empty: "weft-<preset>-<arch>-<type>"
  // Chat: written as tokenizer.chat_template when non-empty; control_tokens (the template's
  // special texts, <|im_start|> ...) take the last ids of the vocabulary, as control tokens.
  std::string chat_template;
  std::vector<std::string> control_tokens;
  // > 0: write a split model of parts with at most this many tensors (llama-gguf-split's
  // --split-max-tensors), named <path without .gguf>-0000k-of-0000n.gguf.
  size_t split_max_tensors = 0;
};

// Preset shape; throws weft::Error("gen-model", ...) for an unknown name. An architecture with
// shapes of its own (deepseek2: tiny-moe's latent-attention variant; qwen35 / qwen35moe: tiny's /
// tiny-moe's hybrid variant) picks them by arch.
GenModelShape gen_model_preset(std::string_view preset, std::string_view arch = {});
// Preset + overrides + n_ctx, validated (vocab >= 259, heads divide n_embd, ...).
GenModelShape gen_model_shape(const GenModelOptions& o);

// Storage type of one 2-D weight as llama.cpp's quantizer would pick it: the mix rules of
// q4_k_m / q5_k_m (attn_v and ffn_down of some layers and output in q6_k) and of mxfp4 (the expert
// stacks, "ffn_*_exps", in mxfp4, every other matrix q8_0), then the fallback
// for rows that do not fill a K-quant's 256-element block (q4_k -> q5_0, q5_k -> q5_1,
// q6_k -> q8_0), then f16 for rows that do not fill any block. `tensor` is the name without
// "blk.N." ("attn_v.weight"), layer its N (-1 for non-layer tensors).
DType gen_tensor_type(std::string_view type, std::string_view tensor, int layer, int n_layer, int64_t row_len,
                      bool tied);

// llama_ftype number written as general.file_type for a type name (q4_k_m -> 15).
uint32_t gen_file_type(std::string_view type);

// SPM vocab: <unk>, <s>, </s>, 256 byte tokens <0x00>..<0xFF>, then deterministic pieces, and
// last the control tokens asked for (those not already among the first three).
struct GenVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte
};
GenVocab gen_vocab(int64_t n_vocab, const std::vector<std::string>& control_tokens = {});

// Writes o.path (or its split parts); returns the files written.
std::vector<std::string> generate_model(const GenModelOptions& o);
std::vector<uint8_t> generate_model_bytes(const GenModelOptions& o);  // same bytes, in memory

}  // namespace weft::tools
