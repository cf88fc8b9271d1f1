// The decoder graph of the llama family (llama, qwen2, qwen3, the mixtures of experts qwen2moe,
// qwen3moe and Mixtral) and its near relatives Gemma 3 and Phi-3: one token step.
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"

namespace weft::model {

graph::Graph build_llama_graph(const ModelConfig& c);

}  // namespace weft::model
