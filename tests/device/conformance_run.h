// Conformance suite helpers: generated tiny models (one per option set, per test process), a
// scenario of steps that exercises batching and the KV cache, and running it on a group of devices
// whatever its split, with the logits of each sequence reassembled from the devices' vocab slices.
#pragma once

#include "device/device_group.h"
#include "device/device_kind.h"
#include "model/llama_graph.h"
#include "model/model_config.h"
#include "parallel/planner.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace weft::device::conformance {

// A device kind under test: the --devices entry that makes one of its devices, and how far its
// logits may stray from the reference CPU device's (relative to the largest reference logit): with
// float weights, and with weights whose activations are rounded to int8 first. There a kind that
// adds in another order than the reference (a GPU's subgroups) can land an activation on the other
// side of a rounding boundary, moving a logit by about a percent: on iq4_xs the Vulkan device parts
// from the CPU's SIMD kernels on one sequence and from its scalar ones on the other. Blocks are
// checked exactly elsewhere (tests/device/vulkan/vk_blocks_test.cpp).
struct KindUnderTest {
  std::string name;  // the gtest instance name
  std::string spec;  // "cpu:2", later "vk:0"
  double logits_tolerance = 0;
  double quantized_logits_tolerance = 0;
};

struct TinyModel {
  std::unique_ptr<gguf::File> file;
  model::ModelConfig config;
  graph::Graph graph;
  graph::WeightTable weights;
  parallel::Plan plan(parallel::SplitMode mode, std::vector<double> ratios) const {
    return parallel::make_plan(mode, graph, weights, ratios);
  }
};

// The generated model of preset/type/arch (tied: shared embeddings), written once per process.
// Preset "tiny-k": tiny with rows of 256 and 512 values (n_embd, n_ff), whole K-quant super-blocks:
// tiny's rows of 64 and 160 make gen-model fall back to 32-value types (gen_tensor_type), so a
// K-quant or IQ4_XS model in that shape holds none of its own type. Preset "tiny-heads" (gemma4):
// tiny with Gemma 4's heads per layer, global layers' 32 wide over 1 KV head, the others' 16 over 2.
inline const TinyModel& tiny_model(const std::string& preset, const std::string& type, const std::string& arch,
                                   bool tied = false) {
  static std::map<std::string, TinyModel> models;
  const std::string key = preset + "-" + type + "-" + arch + (tied ? "-tied" : "");
  auto it = models.find(key);
  if (it != models.end()) return it->second;
  tools::GenModelOptions o;
  o.preset = preset;
  if (preset == "tiny-k") {
    o.preset = "tiny";
    o.overrides.n_embd = 256;
    o.overrides.n_ff = 512;
  }
  if (preset == "tiny-heads") {
    o.preset = "tiny";
    o.overrides.head_dim = 32;
    o.overrides.head_dim_swa = 16;
    o.overrides.n_head_kv = 1;
    o.overrides.n_head_kv_swa = 2;
  }
  if (preset == "tiny-e2b") {  // Gemma 4 E2B's: per-layer inputs, the last 2 of 4 layers over earlier caches
    o.preset = "tiny";
    o.overrides.n_layer = 4;
    o.overrides.n_embd_per_layer = 16;
    o.overrides.n_kv_shared = 2;
  }
  o.type = type;
  o.arch = arch;
  o.tied = tied;
  o.seed = 7;
  o.sliding_window = 3;  // gemma3: the scenario's positions reach past it
  o.path = testing::TempDir() + "/weft_conformance_" + key + "_" + std::to_string(::getpid()) + ".gguf";
  tools::generate_model(o);
  TinyModel m;
  m.file = gguf::File::open(o.path);
  m.config = model::read_config(*m.file);
  m.graph = model::build_llama_graph(m.config);
  m.weights = model::weight_table(*m.file);
  return models[key] = std::move(m);
}

inline const LoadOptions kLoad{64, 2, 16};  // n_ctx, n_seq, max_tokens

// Two sequences read their prompts together, then decode one token each: batching, attention over
// each slot's cache, and logits and candidates of every last token.
inline std::vector<Step> scenario() {
  auto seq = [](int32_t slot, int32_t pos0, int32_t n) {
    StepSeq s;
    s.seq = slot;
    s.pos0 = pos0;
    s.n_tokens = n;
    s.want_logits = true;
    return s;
  };
  Step prompt;
  prompt.tokens = {1, 5, 9, 3, 7, 2};
  prompt.seqs = {seq(0, 0, 4), seq(1, 0, 2)};
  Step decode;
  decode.tokens = {4, 8};
  decode.seqs = {seq(0, 4, 1), seq(1, 2, 1)};
  return {prompt, decode};
}

// Per step, per sequence: the whole vocabulary's logits, from whichever devices hold them.
using Logits = std::vector<std::vector<std::vector<float>>>;

// Loads devices[i] with plan.devices[i] and runs the steps: a layer split one device after
// another (the residual stream handed on), a tensor split all at once.
inline Logits run_scenario(const Devices& devices, const parallel::Plan& plan, const TinyModel& m,
                           const std::vector<Step>& steps) {
  if (devices.size() > 1) connect_group(devices, parallel::WireType::F32);
  std::vector<parallel::DeviceGraph> graphs = plan.devices;
  load_devices(devices, graphs, *m.file, kLoad);
  Logits out;
  for (const Step& step : steps) {
    std::vector<StepResult> results(devices.size());
    if (plan.devices[0].passes_residual) {
      std::vector<float> residual;
      for (size_t d = 0; d < devices.size(); ++d) {
        Step s = step;
        s.input = std::move(residual);
        devices[d]->submit(std::move(s));
        results[d] = devices[d]->wait();
        residual = results[d].output;
      }
    } else {
      for (const auto& d : devices) d->submit(step);
      for (size_t d = 0; d < devices.size(); ++d) results[d] = devices[d]->wait();
    }
    auto& per_seq = out.emplace_back(step.seqs.size(), std::vector<float>(m.config.dims.n_vocab, NAN));
    for (size_t d = 0; d < devices.size(); ++d) {
      const auto& g = plan.devices[d];
      if (!g.has_logits) continue;
      EXPECT_EQ(results[d].seqs.size(), step.seqs.size()) << devices[d]->name();
      for (size_t q = 0; q < results[d].seqs.size() && q < step.seqs.size(); ++q) {
        const auto& l = results[d].seqs[q].logits;
        EXPECT_EQ(static_cast<int64_t>(l.size()), g.vocab.size()) << devices[d]->name();
        std::copy_n(l.begin(), std::min<int64_t>(l.size(), g.vocab.size()), per_seq[q].begin() + g.vocab.begin);
      }
    }
  }
  return out;
}

// got within tolerance * max|want| of want everywhere, and the same greedy token.
inline void expect_logits_near(const Logits& got, const Logits& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << what;
    for (size_t q = 0; q < want[s].size(); ++q) {
      const auto& g = got[s][q];
      const auto& w = want[s][q];
      ASSERT_EQ(g.size(), w.size()) << what;
      double scale = 0, worst = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        scale = std::max(scale, std::fabs(double(w[i])));
        worst = std::max(worst, std::isnan(g[i]) ? INFINITY : std::fabs(double(g[i]) - w[i]));
      }
      ASSERT_GT(scale, 0) << what << ": the reference logits are all zero";
      EXPECT_LE(worst, tolerance * scale) << what << ", step " << s << ", sequence " << q;
      EXPECT_EQ(std::max_element(g.begin(), g.end()) - g.begin(), std::max_element(w.begin(), w.end()) - w.begin())
          << what << ", step " << s << ", sequence " << q;
    }
  }
}

}  // namespace weft::device::conformance
