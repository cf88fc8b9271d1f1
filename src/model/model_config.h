// Model hyper-parameters read from GGUF metadata ("<arch>.*" keys, as llama.cpp names them).
// What differs between supported architectures is data here, not branches in the graph builder.
#pragma once

#include "gguf/gguf_reader.h"
#include "graph/graph.h"

#include <string>
#include <vector>

namespace weft::model {

struct ArchTraits {
  bool qkv_bias = false;   // qwen2: attn_q/k/v carry biases
  bool qk_norm = false;    // qwen3: per-head RMSNorm on q and k before RoPE
  bool rope_neox = false;  // qwen2/qwen3 rotate (i, i + n_rot/2) pairs
  // Mixture of experts, as llama.cpp builds each architecture (build_moe_ffn's arguments):
  bool moe = false;                  // qwen2moe/qwen3moe: every layer's FFN is experts (llama: if expert_count > 0)
  bool shared_expert = false;        // qwen2moe: plus a dense expert gated by sigmoid(ffn_gate_inp_shexp x)
  bool expert_weights_norm = false;  // qwen3moe, Mixtral: the top-k weights renormalised (qwen2moe: not)
  // Gemma 3: token embeddings scaled by sqrt(n_embd), norms after attention and after the FFN
  // too, a GELU-gated FFN, sliding-window layers (every sliding_window_pattern-th layer global).
  bool gemma = false;
  // Phi-3: q, k, v in one attn_qkv tensor (when the file fuses them) and gate + up in one ffn_up
  // [gate; up] of 2 * n_ff rows; LongRoPE frequency factors (rope_factors_long / _short).
  bool phi3 = false;
  // gpt-oss: attention sinks, biases on q/k/v/o, on the router and on every expert; the FFN norm
  // named post_attention_norm; top-k of the router's logits, then a softmax over those k; the
  // clamped SwiGLU; every other layer a sliding window (from the first).
  bool gpt_oss = false;
  // Gemma 4 (with `gemma`): attention scores unscaled, V RMS-normed without a weight, a layer
  // without attn_v using K's projection as its V, proportional RoPE (rope_freqs) on the global
  // layers only, and the sliding-window layers listed one flag per layer. Its mixture of experts
  // (26B-A4B) keeps the dense FFN beside the experts, each branch normed before and after, and
  // routes from the residual stream RMS-normed, times 1/sqrt(n_embd) and ffn_gate_inp.scale.
  bool gemma4 = false;
  // DeepSeek V2/V3 (llama.cpp's deepseek2, MLA form: attn_k_b and attn_v_b): multi-head latent
  // attention, the first leading_dense_block_count layers dense, then experts beside an ungated
  // shared expert, routed by softmax or by biased sigmoid scores over expert groups.
  bool deepseek = false;
  // Qwen 3.5 (qwen35, qwen35moe): Gated DeltaNet layers (graph::Dims::linear_attention), the others
  // full attention whose attn_q holds each head's query and then its output gate (sigmoid), with q/k
  // norms and a rotation of the first n_rot features (IMROPE: text positions on every section);
  // the FFN's norm named post_attention_norm; the last nextn_predict_layers blocks (multi-token
  // prediction) not run.
  bool qwen35 = false;
  // Qwen3-Next (with `qwen35`): value heads in the checkpoint's grouped order
  // (Dims::linear_v_grouped), beta and alpha in one ssm_ba ([beta; alpha] per key head), ordinary
  // partial NeoX RoPE.
  bool qwen3next = false;
};

struct ModelConfig {
  std::string arch;
  ArchTraits traits;
  graph::Dims dims;
  int64_t n_ctx_train = 0;
  bool tied_output = false;     // no output.weight: logits use token_embd.weight
  bool fused_qkv = false;       // attn_qkv.weight holds q, k and v (Phi-3)
  bool output_bias = false;     // output.bias (Phi-3)
  std::vector<uint8_t> k_as_v;  // Gemma 4: per layer, no attn_v: V is K's projection
  // Experts' gate and up in one ffn_gate_up_exps stack [n_embd, 2 n_ff_exp, n_expert], each
  // expert's gate rows first (Gemma 4's files).
  bool fused_gate_up_exps = false;
  // ffn_down_exps.scale (n_expert values) in every layer: each expert's output times its value.
  bool expert_out_scale = false;
  // exp_probs_b.bias (n_expert values) in every MoE layer: added to the sigmoid scores to select
  // experts, not to their weights (DeepSeek V3).
  bool expert_selection_bias = false;
  // Gemma 4: per layer, the file has layer_output_scale.weight (f32[1]): the layer's output, the
  // residual stream after its FFN, is multiplied by it.
  std::vector<uint8_t> out_scale;
  // LongRoPE (Phi-3): the long factors replace the short ones when a sequence's context exceeds
  // rope_original_ctx (llama.cpp: n_ctx_seq > n_ctx_orig_yarn); see for_context().
  std::vector<float> rope_factors_long;
  int64_t rope_original_ctx = 0;
  int64_t q_lora_rank = 0;  // DeepSeek: the query's compressed width (attn_q_a, attn_q_b); 0: attn_q
  // Qwen3-Next's older files: one ssm_in per linear layer holding, per key head, its q, its k, then
  // its value heads' v and z (attn_qkv and attn_gate in newer ones).
  bool linear_qkvz = false;
};

// The configuration for sequences of n_ctx_seq positions: LongRoPE's long factors where that is
// past the original context, as llama.cpp picks them.
ModelConfig for_context(ModelConfig c, int64_t n_ctx_seq);

// Reads and validates the hyper-parameters; throws weft::Error("model", ...) naming the bad key.
ModelConfig read_config(const gguf::File& f);

// Types and shapes of every tensor, for the planner.
graph::WeightTable weight_table(const gguf::File& f);

}  // namespace weft::model
