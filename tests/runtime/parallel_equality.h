// Helpers of the split-equality tests: engines of N one-thread CPU devices, greedy generation, and
// the logits of a split compared with one device's over a prompt and a few decode steps.
#pragma once

#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace weft::runtime::equality {

// Relative to the largest logit magnitude: f32 partial sums are added in a different order.
constexpr double kLogitRelTol = 1e-4;

struct Config {
  std::string name;
  parallel::SplitMode mode;
  std::vector<double> ratios;  // one CPU device (1 thread) per entry
  parallel::MoeSplit moe = parallel::MoeSplit::Auto;
};

// Every split the equality tests check: even and uneven tensor splits of 2..8 devices (more than
// a tiny model's KV heads), a zero share, and layer splits.
inline std::vector<Config> configs() {
  using parallel::SplitMode;
  return {
      {"tp2", SplitMode::Tensor, {1, 1}},
      {"tp2_3to1", SplitMode::Tensor, {3, 1}},
      {"tp3", SplitMode::Tensor, {1, 1, 1}},
      {"tp3_uneven", SplitMode::Tensor, {1, 2, 3}},
      {"tp4", SplitMode::Tensor, {1, 1, 1, 1}},
      {"tp6", SplitMode::Tensor, {1, 1, 1, 1, 1, 1}},
      {"tp8", SplitMode::Tensor, {1, 1, 1, 1, 1, 1, 1, 1}},
      {"tp5_uneven", SplitMode::Tensor, {5, 1, 2, 1, 3}},
      {"tp3_zero_share", SplitMode::Tensor, {2, 0, 1}},
      {"layer2", SplitMode::Layer, {1, 1}},
      {"layer3_uneven", SplitMode::Layer, {1, 3, 1}},
  };
}

inline EngineOptions options(const Config& c, DType cache = DType::F16) {
  EngineOptions o;
  o.k_type = o.v_type = cache;
  o.mode = c.mode;
  o.ratios = c.ratios;
  o.moe_split = c.moe;
  for (size_t i = 0; i < c.ratios.size(); ++i) o.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
  o.n_ctx = 256;
  o.n_batch = 16;  // the prompt spans several steps
  return o;
}

inline EngineOptions single(DType cache = DType::F16) {
  return options({"one", parallel::SplitMode::None, {1}}, cache);
}

inline std::vector<Token> greedy(const gguf::File& f, EngineOptions o, const std::vector<Token>& prompt, int n) {
  Engine e(f, std::move(o));
  model::SamplingParams p;
  p.temp = 0;
  auto tokens = runtime::generate(e, nullptr, prompt, n, p).generated;
  // A device that fails is re-planned around, and the survivors would still give the tokens.
  EXPECT_EQ(e.device_losses(), 0) << "a device was lost";
  return tokens;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

// The prompt, then a few single-token steps, so the KV cache path is compared too.
inline void expect_logits_match(const gguf::File& f, EngineOptions split, const std::string& name,
                                const std::vector<Token>& prompt, DType cache = DType::F32, double tol = kLogitRelTol) {
  Engine ref(f, single(cache));
  split.k_type = split.v_type = cache;
  Engine tp(f, std::move(split));
  std::vector<Token> feed = prompt;
  for (int step = 0; step < 4; ++step) {
    const auto a = ref.eval_logits(feed);
    const auto b = tp.eval_logits(feed);
    ASSERT_EQ(a.size(), b.size());
    const double scale = std::max(max_abs(a), 1e-6);
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]) / scale);
    EXPECT_LT(worst, tol) << name << " step " << step << " cache " << dtype_name(cache);
    feed = {static_cast<Token>(std::max_element(a.begin(), a.end()) - a.begin())};
  }
  EXPECT_EQ(tp.device_losses(), 0) << name << ": a device was lost";
}

inline void expect_logits_match(const gguf::File& f, const Config& c, const std::vector<Token>& prompt,
                                DType cache = DType::F32, double tol = kLogitRelTol) {
  expect_logits_match(f, options(c, cache), c.name, prompt, cache, tol);
}

// n tokens below n_vocab after BOS; another `salt`, another prompt.
inline std::vector<Token> some_prompt(int64_t n_vocab, int n, int salt = 0) {
  std::vector<Token> p{1};
  for (int i = 1; i < n; ++i) p.push_back(static_cast<Token>((i * 7919 + 13 + salt * 101) % n_vocab));
  return p;
}

}  // namespace weft::runtime::equality
