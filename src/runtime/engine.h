// The coordinator side of a run: reads the model, plans the split, loads every device, and steps
// them together. Sampling is distributed: devices reduce their logits slices to candidates and
// only those cross to the coordinator.
#pragma once

#include "device/device.h"
#include "device/device_spec.h"
#include "graph/graph.h"
#include "model/model_config.h"
#include "model/sampling.h"
#include "parallel/plan.h"

#include <memory>
#include <random>
#include <span>
#include <vector>

namespace weft::runtime {

struct EngineOptions {
  std::vector<device::DeviceSpec> devices;  // empty: one CPU device with all cores
  parallel::SplitMode mode = parallel::SplitMode::Tensor;
  std::vector<double> ratios;  // empty: proportional to each device's threads
  int32_t n_ctx = 0;           // 0: min(training context, 4096)
  int32_t n_batch = 512;       // prompt tokens per step
  parallel::WireType wire = parallel::WireType::F32;
  bool map_weights = false;                        // CPU devices read weights from the file mapping (--mmap)
  DType k_type = DType::F16, v_type = DType::F16;  // KV cache (-ctk / -ctv)
};

class Engine {
 public:
  Engine(const gguf::File& file, EngineOptions opt);
  ~Engine();

  const model::ModelConfig& config() const { return config_; }
  const graph::Graph& graph() const { return graph_; }
  const parallel::Plan& plan() const { return plan_; }
  int32_t n_ctx() const { return opt_.n_ctx; }
  int32_t n_past() const { return n_past_; }
  const std::vector<std::unique_ptr<device::Device>>& devices() const { return devices_; }

  // Feeds tokens at the current position (in n_batch chunks) and draws the next token.
  Token eval_and_sample(std::span<const Token> tokens, const model::SamplingParams& p, std::span<const Token> recent,
                        std::mt19937_64& rng);
  // Feeds tokens and returns the full logits of the last one (gathered: for tests and tools).
  std::vector<float> eval_logits(std::span<const Token> tokens);
  // Starts a new sequence.
  void reset() { truncate(0); }
  // Forgets every position from n_keep on (n_keep <= n_past): the next token goes at n_keep.
  void truncate(int32_t n_keep);

 private:
  std::vector<device::StepResult> step(std::span<const Token> tokens, bool last_chunk, const model::SamplingParams& p,
                                       std::span<const Token> recent, bool logits);
  void wait_all(std::vector<device::StepResult>& results);
  std::vector<device::StepResult> eval(std::span<const Token> tokens, const model::SamplingParams& p,
                                       std::span<const Token> recent, bool logits);

  const gguf::File& file_;
  EngineOptions opt_;
  model::ModelConfig config_;
  graph::Graph graph_;
  parallel::Plan plan_;
  std::vector<std::unique_ptr<device::Device>> devices_;
  int32_t n_past_ = 0;
};

}  // namespace weft::runtime
