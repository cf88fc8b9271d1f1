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
};

struct ModelConfig {
  std::string arch;
  ArchTraits traits;
  graph::Dims dims;
  int64_t n_ctx_train = 0;
  bool tied_output = false;  // no output.weight: logits use token_embd.weight
};

// Reads and validates the hyper-parameters; throws weft::Error("model", ...) naming the bad key.
ModelConfig read_config(const gguf::File& f);

// Types and shapes of every tensor, for the planner.
graph::WeightTable weight_table(const gguf::File& f);

}  // namespace weft::model
