// The float shaders gpt-oss added to the Vulkan device, against the CPU's kernels on seeded data:
// attention with sinks (attention.comp, with and without a sliding window) against attention_ref,
// the routing that takes the top-k logits and a softmax over them (moe_route.comp) against
// moe_route, and the clamped SwiGLU (elementwise.comp's op 4) against swiglu_oai. The conformance
// suite checks whole models; here a sink read from the wrong head or a tie broken the other way
// shows as the value it is.
#include "device/vulkan/vk_gpu.h"
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "support/vk_validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace weft::device::vk {
namespace {

// The shaders' push constants, as vk_graph_runner.cpp's: a change there is a change here.
struct AttentionPush {
  uint32_t n_q, n_kv, head_dim, n_ctx, q_head_begin, kv_begin, group;
  float scale;
  uint32_t window, windowed, has_sinks;
};
struct RoutePush {
  uint32_t n_tokens, n_expert, k, norm, selected, sigmoid = 0, has_bias = 0, n_groups = 0, n_groups_used = 0;
  float weights_scale = 0;
};
struct ElementwisePush {
  uint32_t n, width, op;
  float alpha, limit;
};

std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

class VkOps : public testing::Test {
 protected:
  Gpu gpu{0};
  std::vector<Buffer> buffers;
  ~VkOps() override {
    for (Buffer& b : buffers) gpu.destroy(b);
  }
  template <typename T>
  VkBuffer host(const std::vector<T>& v) {
    buffers.push_back(gpu.create_buffer(v.size() * sizeof(T), Memory::Upload, "test input"));
    std::memcpy(buffers.back().mapped, v.data(), v.size() * sizeof(T));
    return buffers.back().buffer;
  }
  Buffer& readback(size_t n_floats) {
    buffers.push_back(gpu.create_buffer(n_floats * sizeof(float), Memory::Readback, "test output"));
    return buffers.back();
  }
  void attention_with_sinks(int64_t hd);
};

// got within rel * max|want| of want everywhere (at most a few failures printed).
void expect_near(const float* got, const std::vector<float>& want, float rel, const std::string& what) {
  float scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  ASSERT_GT(scale, 0) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    const bool ok = std::fabs(got[i] - want[i]) <= rel * scale;
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << what << ": value " << i << ": " << got[i] << " != " << want[i];
  }
}

// One slot's tokens over a cache of 100 rows (two chunks of 64 keys and a part), as a device holding
// q heads 2..5 of 8 and kv heads 1..2 of 4 sees them: each local q head h reads kv head h / 2 and
// its own sink, sinks[h]. Sinks well above the scores (a softmax mostly sink: the outputs shrink),
// well below (no effect), and between; tokens at positions where the window starts mid-chunk. Heads
// of 72, and of 512 (Gemma 4's global heads, the kernel's widest: 8 output dims a thread).
TEST_F(VkOps, AttentionSinksAddToEachHeadsDenominatorOnly) {
  for (const int64_t hd : {72, 512}) attention_with_sinks(hd);
}

void VkOps::attention_with_sinks(int64_t hd) {
  const int64_t n_q = 4, n_kv = 2, n_ctx = 100, group = 2;
  const std::vector<int32_t> pos = {99, 70, 64, 5, 0};
  const int64_t n_tok = static_cast<int64_t>(pos.size());
  const std::vector<float> q = uniform(n_tok * n_q * hd, 1, -1, 1), k = uniform(n_kv * n_ctx * hd, 2, -1, 1),
                           v = uniform(n_kv * n_ctx * hd, 3, -1, 1);
  const std::vector<float> sinks = {3.0f, -20.0f, 0.5f, -0.25f};
  const std::vector<int32_t> kv_of_q = {0, 0, 1, 1};
  std::vector<int32_t> tok;  // the runner's (slot, position) pairs
  for (int32_t p : pos) tok.insert(tok.end(), {0, p});
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const VkBuffer qb = host(q), kb = host(k), vb = host(v), tb = host(tok), sb = host(sinks), base = host(tok);
  Buffer& out = readback(q.size());
  const Pipeline& p = gpu.pipeline("attention_f32", 7, sizeof(AttentionPush));
  for (const int64_t window : {0, 40})
    for (const bool with_sinks : {true, false}) {
      kernels::AttentionShape s{n_tok, n_q, n_kv, hd, scale};
      s.n_ctx = n_ctx;
      s.window = window;
      if (with_sinks) s.sinks = sinks.data();
      std::vector<float> want(q.size()), plain(q.size());
      kernels::attention_ref(s, q.data(), k.data(), v.data(), kv_of_q.data(), pos.data(), want.data());
      s.sinks = nullptr;
      kernels::attention_ref(s, q.data(), k.data(), v.data(), kv_of_q.data(), pos.data(), plain.data());
      if (with_sinks) {
        float moved = 0;  // the sinks matter here, so a shader ignoring them fails
        for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::fabs(want[i] - plain[i]));
        ASSERT_GT(moved, 0.05f);
      }
      const AttentionPush push{static_cast<uint32_t>(n_q),
                               static_cast<uint32_t>(n_kv),
                               static_cast<uint32_t>(hd),
                               static_cast<uint32_t>(n_ctx),
                               2,
                               1,
                               static_cast<uint32_t>(group),
                               scale,
                               static_cast<uint32_t>(window),
                               0,
                               with_sinks ? 1u : 0u};
      gpu.begin();
      gpu.dispatch(p, gpu.bind(p, {qb, kb, vb, tb, out.buffer, base, sb}), &push, n_q, static_cast<uint32_t>(n_tok));
      gpu.submit();
      expect_near(static_cast<const float*>(out.mapped), want, 1e-5f,
                  "heads " + std::to_string(hd) + ", window " + std::to_string(window) +
                      (with_sinks ? ", sinks" : ", no sinks"));
    }
}

// Both gatings, with and without the weights' renormalisation and per-expert scales, over logits on
// a grid of quarters (ties between experts, broken to the lower id) and ids identical to the CPU's.
TEST_F(VkOps, MoeRouteMatchesTheCpuForBothGatings) {
  const int64_t n_tok = 70, n_expert = 12, k = 4;  // over one workgroup of 64 tokens
  std::vector<float> logits = uniform(n_tok * n_expert, 4, -3, 3);
  for (float& l : logits) l = std::round(l * 4) / 4;
  const std::vector<float> ones(n_expert, 1.f), scales = uniform(n_expert, 7, 0.5f, 2.f);
  const VkBuffer lb = host(logits), ones_b = host(ones), scales_b = host(scales);
  Buffer& out = readback(n_tok * 2 * k);  // last: a later buffer would move it
  const Pipeline& p = gpu.pipeline("moe_route", 4, sizeof(RoutePush));
  for (const bool scaled : {false, true})
    for (const bool selected : {false, true})
      for (const bool norm : {false, true}) {
        const std::string what = std::string(selected ? "softmax over the selected" : "softmax") +
                                 (norm ? ", norm" : "") + (scaled ? ", expert scales" : "");
        std::vector<float> want(n_tok * 2 * k);
        kernels::moe_route(logits.data(), n_tok, {n_expert, k, norm, selected, scaled ? scales.data() : nullptr},
                           want.data());
        const RoutePush push{static_cast<uint32_t>(n_tok), static_cast<uint32_t>(n_expert), static_cast<uint32_t>(k),
                             norm ? 1u : 0u, selected ? 1u : 0u};
        gpu.begin();
        gpu.dispatch(p, gpu.bind(p, {lb, out.buffer, scaled ? scales_b : ones_b, ones_b}), &push, (n_tok + 63) / 64);
        gpu.submit();
        const auto* got = static_cast<const float*>(out.mapped);
        int bad = 0;
        for (int64_t t = 0; t < n_tok && bad < 5; ++t)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t i = t * 2 * k + j;
            const float w = want[i + k], g = got[i + k];
            const bool ok = got[i] == want[i] && std::fabs(g - w) <= 1e-6f;
            if (!ok) ++bad;
            EXPECT_TRUE(ok) << what << ": token " << t << " slot " << j << ": expert " << got[i] << " weight " << g
                            << ", want " << want[i] << " weight " << w;
          }
      }
}

// DeepSeek V3's routing: sigmoid scores, chosen by score plus the selection bias among the best
// groups (a group's score its two best), weighted by the unbiased scores, renormalised and scaled;
// ids identical to the CPU's (the bias must move some choices, the groups exclude some experts).
TEST_F(VkOps, MoeRouteMatchesTheCpuForGroupedSigmoidScores) {
  const int64_t n_tok = 70, n_expert = 16, k = 4, n_groups = 4, n_groups_used = 2;
  std::vector<float> logits = uniform(n_tok * n_expert, 8, -3, 3);
  const std::vector<float> bias = uniform(n_expert, 9, -0.3f, 0.3f), ones(n_expert, 1.f);
  const VkBuffer lb = host(logits), bias_b = host(bias), ones_b = host(ones);
  Buffer& out = readback(n_tok * 2 * k);
  const Pipeline& p = gpu.pipeline("moe_route", 4, sizeof(RoutePush));
  kernels::MoeRouting r{n_expert, k, true, false, nullptr};
  r.sigmoid = true;
  r.selection_bias = bias.data();
  r.n_groups = n_groups;
  r.n_groups_used = n_groups_used;
  r.weights_scale = 2.5f;
  std::vector<float> want(n_tok * 2 * k), unbiased(want.size());
  kernels::moe_route(logits.data(), n_tok, r, want.data());
  kernels::MoeRouting plain = r;
  plain.selection_bias = nullptr;
  kernels::moe_route(logits.data(), n_tok, plain, unbiased.data());
  int moved = 0;
  for (int64_t t = 0; t < n_tok; ++t) moved += want[t * 2 * k] != unbiased[t * 2 * k];
  ASSERT_GT(moved, 0) << "the bias must change some choice for the test to mean anything";
  RoutePush push{static_cast<uint32_t>(n_tok), static_cast<uint32_t>(n_expert), static_cast<uint32_t>(k), 1u, 0u};
  push.sigmoid = 1;
  push.has_bias = 1;
  push.n_groups = static_cast<uint32_t>(n_groups);
  push.n_groups_used = static_cast<uint32_t>(n_groups_used);
  push.weights_scale = 2.5f;
  gpu.begin();
  gpu.dispatch(p, gpu.bind(p, {lb, out.buffer, ones_b, bias_b}), &push, (n_tok + 63) / 64);
  gpu.submit();
  const auto* got = static_cast<const float*>(out.mapped);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = t * 2 * k + j;
      ASSERT_EQ(got[i], want[i]) << "token " << t << " slot " << j;
      ASSERT_NEAR(got[i + k], want[i + k], 1e-5f) << "token " << t << " slot " << j;
    }
}

// gpt-oss's constants, gates and ups well past the limit on both sides.
TEST_F(VkOps, SwiGluOaiMatchesTheCpu) {
  const float alpha = 1.702f, limit = 7.0f;
  const int64_t n = 3000;
  const std::vector<float> gate = uniform(n, 5, -12, 12), up = uniform(n, 6, -12, 12);
  std::vector<float> want(n);
  kernels::swiglu_oai(gate.data(), up.data(), want.data(), n, alpha, limit);
  const VkBuffer gb = host(gate), ub = host(up);
  Buffer& out = readback(n);
  const Pipeline& p = gpu.pipeline("elementwise", 3, sizeof(ElementwisePush));
  const ElementwisePush push{static_cast<uint32_t>(n), static_cast<uint32_t>(n), 4, alpha, limit};
  gpu.begin();
  gpu.dispatch(p, gpu.bind(p, {gb, ub, out.buffer}), &push, (n + 255) / 256);
  gpu.submit();
  const auto* got = static_cast<const float*>(out.mapped);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {  // each value on its own: exp's last bits may differ
    const bool ok = std::fabs(got[i] - want[i]) <= 1e-6f * std::max(1.0f, std::fabs(want[i]));
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "value " << i << " (gate " << gate[i] << ", up " << up[i] << "): " << got[i]
                    << " != " << want[i];
  }
}

}  // namespace
}  // namespace weft::device::vk
