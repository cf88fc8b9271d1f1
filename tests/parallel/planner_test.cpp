// The split planner on synthetic llama-shaped graphs: no model file, no weights, no threads.
#include "parallel/planner.h"
#include "model/llama_graph.h"
#include "parallel/synthetic_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include "core/error.h"

#include <fmt/format.h>

#include <numeric>
#include <set>

namespace weft::parallel {
namespace {

using graph::Axis;

using synthetic::config;
using synthetic::Shape;
using synthetic::weights;

const Shape kStories{64, 5, 172, 8, 4, 512};  // stories260K: FFN 172 does not divide
const Shape k500mTwoLayers{2048, 2, 5632, 32, 8, 32000, DType::Q4_0};
const Shape kQ4K{2048, 2, 5632, 32, 8, 32000, DType::Q4_K};

std::vector<std::vector<double>> dense_ratio_sets() {
  return {{1},
          {1, 1},
          {3, 1},
          {1, 1, 1},
          {1, 2, 3},
          {1, 1, 1, 1},
          {5, 1, 1, 1, 1},
          {1, 1, 1, 1, 1, 1},
          {1, 1, 1, 1, 1, 1, 1},
          {1, 1, 1, 1, 1, 1, 1, 1},
          {2, 0, 1}};
}

TEST(Planner, ProportionalRangesCoverAndFollowRatios) {
  for (const auto& r : dense_ratio_sets()) {
    for (int64_t n : {0, 1, 7, 172, 5632}) {
      const auto ranges = proportional_ranges(n, r);
      ASSERT_EQ(ranges.size(), r.size());
      const double total = std::accumulate(r.begin(), r.end(), 0.0);
      int64_t at = 0;
      for (size_t d = 0; d < r.size(); ++d) {
        EXPECT_EQ(ranges[d].begin, at);
        at = ranges[d].end;
        EXPECT_LE(std::abs(ranges[d].size() - n * r[d] / total), 1.0) << "n=" << n << " device " << d;
      }
      EXPECT_EQ(at, n);
    }
  }
}

TEST(Planner, TwoAllReducesPerDenseLayer) {
  for (const Shape& s : {kStories, k500mTwoLayers, kQ4K}) {
    const auto g = model::build_llama_graph(config(s));
    for (const auto& r : dense_ratio_sets()) {
      const auto p = plan_tensor(g, weights(g, s.type), r);
      for (int l = 0; l < s.n_layer; ++l) {
        const int expected = r.size() > 1 ? 2 : 0;
        EXPECT_EQ(p.collectives_in_layer(l), expected) << "layer " << l << " devices " << r.size();
        for (const auto& c : p.collectives) {
          if (c.layer == l) {
            EXPECT_EQ(c.op, LocalOp::AllReduce);
          }
        }
      }
      EXPECT_EQ(p.collectives_in_layer(-1), 0) << "no logits gather";
      EXPECT_TRUE(p.fallbacks.empty()) << p.fallbacks.front();
    }
  }
}

TEST(Planner, CollectiveBytesFollowTheWireType) {
  const auto g = model::build_llama_graph(config(k500mTwoLayers));
  const auto p = plan_tensor(g, weights(g, DType::Q4_0), {1, 1});
  ASSERT_FALSE(p.collectives.empty());
  for (const auto& c : p.collectives) {
    EXPECT_EQ(c.values_per_token, k500mTwoLayers.n_embd) << c.after << ": the residual stream is what is all-reduced";
    EXPECT_EQ(c.bytes_per_token(WireType::F32), 4u * k500mTwoLayers.n_embd);
    EXPECT_EQ(c.bytes_per_token(WireType::BF16), 2u * k500mTwoLayers.n_embd);
    EXPECT_EQ(c.bytes_per_token(WireType::F16), 2u * k500mTwoLayers.n_embd);
  }
}

TEST(Planner, LocalOpsComputeTheirGraphOps) {
  for (int k = 0; k < static_cast<int>(graph::OpKind::Count); ++k) {
    const auto op = static_cast<graph::OpKind>(k);
    EXPECT_EQ(local_op_name(local_op(op)), graph::op_name(op));
  }
  const auto g = model::build_llama_graph(config(kStories));
  for (const auto& p : {plan_tensor(g, weights(g, DType::F32), {1, 2}), plan_layers(g, weights(g, DType::F32), {1, 2})})
    for (const auto& dg : p.devices)
      for (const auto& n : dg.nodes)
        if (n.source >= 0) {
          EXPECT_EQ(n.op, local_op(g.nodes[n.source].op)) << n.label;
        }
}

TEST(Planner, CollectivesLineUpAcrossDevices) {
  const auto g = model::build_llama_graph(config(k500mTwoLayers));
  const auto p = plan_tensor(g, weights(g, DType::Q4_0), {1, 2, 3});
  for (const auto& dg : p.devices) {
    std::vector<LocalOp> seq, ref;
    for (const auto& n : dg.nodes)
      if (n.op == LocalOp::AllReduce || n.op == LocalOp::AllGather) seq.push_back(n.op);
    for (const auto& n : p.devices[0].nodes)
      if (n.op == LocalOp::AllReduce || n.op == LocalOp::AllGather) ref.push_back(n.op);
    EXPECT_EQ(seq, ref);
  }
}

TEST(Planner, WeightBytesFollowRatiosWithinOneBlock) {
  for (const Shape& s : {k500mTwoLayers, kQ4K, kStories}) {
    const auto g = model::build_llama_graph(config(s));
    const auto w = weights(g, s.type);
    for (const auto& r : dense_ratio_sets()) {
      if (r.size() < 2) continue;
      const auto p = plan_tensor(g, w, r);
      const double total = std::accumulate(r.begin(), r.end(), 0.0);
      for (const auto& [name, info] : w) {
        if (info.rows == 1 || name == "token_embd.weight") continue;  // vectors and the embedding are replicated
        const uint64_t whole = slice_bytes(info, {name, WeightSlice::Kind::Whole, {}});
        uint64_t sum = 0;
        for (size_t d = 0; d < p.devices.size(); ++d) {
          uint64_t mine = 0;
          for (const auto& n : p.devices[d].nodes)
            if (n.weight.tensor == name && n.op == LocalOp::MatMul) mine += slice_bytes(info, n.weight);
          sum += mine;
          // One unit of the split may move: a GQA group of heads, a quant block of FFN, a vocab row.
          const double unit_bytes =
              static_cast<double>(whole) / (name.find("attn") != std::string::npos ? s.n_head_kv : 1) +
              (name.find("ffn") != std::string::npos ? whole * 256.0 / s.n_ff : 0) +
              (name == "output.weight" ? whole / static_cast<double>(s.n_vocab) : 0);
          const bool kv_replicated =
              (name.find("attn_k.") != std::string::npos || name.find("attn_v.") != std::string::npos) &&
              static_cast<int64_t>(r.size()) > s.n_head_kv;
          if (!kv_replicated) {
            EXPECT_NEAR(static_cast<double>(mine), whole * r[d] / total, unit_bytes) << name << " device " << d;
          }
        }
        const int active = static_cast<int>(std::count_if(r.begin(), r.end(), [](double x) { return x > 0; }));
        const bool kv = name.find("attn_k.") != std::string::npos || name.find("attn_v.") != std::string::npos;
        if (kv && active > s.n_head_kv) {
          EXPECT_GE(sum, whole) << name << ": replicated kv heads";
        } else {
          EXPECT_EQ(sum, whole) << name << ": slices add up to the whole";
        }
      }
    }
  }
}

TEST(Planner, HeadsCoverEveryHeadOnceOrReplicateKv) {
  for (const Shape& s : {kStories, k500mTwoLayers}) {
    const auto g = model::build_llama_graph(config(s));
    for (const auto& r : dense_ratio_sets()) {
      const auto p = plan_tensor(g, weights(g, s.type), r);
      std::vector<int> q_count(s.n_head, 0), kv_count(s.n_head_kv, 0);
      for (const auto& dg : p.devices) {
        for (const auto& n : dg.nodes) {
          if (n.op != LocalOp::Attention || n.layer != 0) continue;
          for (int64_t h = n.q_heads.begin; h < n.q_heads.end; ++h) {
            q_count[h]++;
            const int64_t kv = h / (s.n_head / s.n_head_kv);
            EXPECT_TRUE(kv >= n.kv_heads.begin && kv < n.kv_heads.end) << "q head " << h << " needs its kv head";
          }
          for (int64_t h = n.kv_heads.begin; h < n.kv_heads.end; ++h) kv_count[h]++;
        }
      }
      for (int c : q_count) EXPECT_EQ(c, 1);
      const int active = static_cast<int>(std::count_if(r.begin(), r.end(), [](double x) { return x > 0; }));
      for (int c : kv_count) {
        if (active <= s.n_head_kv)
          EXPECT_EQ(c, 1) << "whole GQA groups: each kv head once";
        else
          EXPECT_GE(c, 1) << "more devices than kv heads: replicated";
      }
    }
  }
}

TEST(Planner, SplitsLandOnQuantBlocks) {
  const auto g = model::build_llama_graph(config(kQ4K));
  const auto p = plan_tensor(g, weights(g, DType::Q4_K), {1, 1, 1});
  for (const auto& dg : p.devices)
    for (const auto& n : dg.nodes)
      if (n.weight.kind == WeightSlice::Kind::Cols) {
        EXPECT_EQ(n.weight.range.begin % 256, 0) << n.label;
        const int64_t cols = g.nodes[g.nodes[n.source].inputs[0]].width;  // the weight's full row length
        EXPECT_TRUE(n.weight.range.end % 256 == 0 || n.weight.range.end == cols) << n.label;
      }
}

TEST(Planner, DeviceWithZeroShareGetsNothingButStaysInTheGroup) {
  const auto g = model::build_llama_graph(config(kStories));
  const auto p = plan_tensor(g, weights(g, DType::F32), {1, 0, 1});
  EXPECT_EQ(p.devices[1].kv_values_per_token, 0u);
  EXPECT_FALSE(p.devices[1].has_logits);
  EXPECT_FALSE(p.devices[1].passes_residual);  // returns nothing (its output node is 0 wide)
  EXPECT_EQ(p.collectives_in_layer(0), 2);
  EXPECT_EQ(p.devices[1].nodes.size(), p.devices[0].nodes.size());
}

// A row-parallel matmul's bias (gpt-oss's attn_output) is added once, by the first device that
// holds any of its input: a device with no heads has no product to add it to.
TEST(Planner, ABiasOnPartialSumsGoesToTheFirstDeviceWithInput) {
  auto g = model::build_llama_graph(config(kStories));
  auto w = weights(g, DType::F32);
  for (auto& n : g.nodes)
    if (n.label == "attn_output") {
      n.bias = fmt::format("blk.{}.attn_output.bias", n.layer);
      w[n.bias] = {DType::F32, n.width, 1, 1};
    }
  for (const auto& [ratios, owner] : {std::pair{std::vector<double>{1, 1}, 0}, {std::vector<double>{0, 1, 1}, 1}}) {
    const auto p = plan_tensor(g, w, ratios);
    for (size_t d = 0; d < ratios.size(); ++d)
      for (const auto& n : p.devices[d].nodes)
        if (n.op == LocalOp::MatMul && n.label == "attn_output")
          EXPECT_EQ(n.bias.kind, static_cast<int>(d) == owner ? WeightSlice::Kind::Whole : WeightSlice::Kind::None)
              << "device " << d << " layer " << n.layer;
  }
}

TEST(Planner, RejectsBadRatios) {
  const auto g = model::build_llama_graph(config(kStories));
  const auto w = weights(g, DType::F32);
  EXPECT_ERROR(plan_tensor(g, w, {}), "devices, got 0");
  EXPECT_ERROR(plan_tensor(g, w, {0, 0}), "split ratios sum to 0");
  EXPECT_ERROR(plan_tensor(g, w, {1, -1}), "split ratio -1 is not a finite number");
  EXPECT_ERROR(plan_tensor(g, w, std::vector<double>(17, 1.0)), "devices, got 17");
}

TEST(Planner, HugeRatiosAreRelativeNotAnOverflow) {
  // 1e308 + 1e308 overflows a double: the shares are still one half each.
  const auto g = model::build_llama_graph(config(kStories));
  const auto w = weights(g, DType::F32);
  const auto huge = plan_tensor(g, w, {1e308, 1e308}), even = plan_tensor(g, w, {1, 1});
  EXPECT_EQ(huge.ratios, even.ratios);
  EXPECT_EQ(huge.devices[0].kv_values_per_token, even.devices[0].kv_values_per_token);
}

TEST(Planner, RejectsWeightsOfTheWrongShape) {
  const auto g = model::build_llama_graph(config(kStories));
  auto w = weights(g, DType::F32);
  w["blk.0.ffn_down.weight"].cols = 100;
  EXPECT_ERROR(plan_tensor(g, w, {1, 1}), "tensor 'blk.0.ffn_down.weight' is 100x");
}

TEST(Planner, LayerSplitGivesWholeLayersInOrder) {
  const auto g = model::build_llama_graph(config(kStories));
  const auto p = plan_layers(g, weights(g, DType::F32), {2, 1, 2});
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].begin, 0);
  EXPECT_EQ(p.layers.back().end, kStories.n_layer);
  EXPECT_TRUE(p.collectives.empty());
  EXPECT_TRUE(p.devices.back().has_logits);
  EXPECT_FALSE(p.devices.front().has_logits);
  EXPECT_TRUE(p.devices.front().passes_residual);
  EXPECT_FALSE(p.devices.back().passes_residual);
  EXPECT_EQ(p.devices[1].nodes.front().op, LocalOp::Input);
}

// Gemma 4 E2B's layout on a Llama shape: FFN widths per layer, each cut by the ratios; the last
// two layers attending over the caches of two before them (q alone, the same heads on each device,
// no KV of their own); per-layer inputs computed whole on every device (no collective, no fallback).
TEST(Planner, Gemma4E2bLayout) {
  auto c = config(kStories);
  auto& d = c.dims;
  d.layer_ff.assign(d.n_layer, d.n_ff);
  d.kv_source.resize(d.n_layer);
  for (int l = 0; l < d.n_layer; ++l) d.kv_source[l] = l;
  d.layer_ff[d.n_layer - 1] = d.layer_ff[d.n_layer - 2] = 2 * d.n_ff;
  d.kv_source[d.n_layer - 1] = d.kv_source[d.n_layer - 2] = 0;
  d.n_embd_per_layer = 16;
  const auto g = model::build_llama_graph(c);
  const auto w = weights(g, DType::F32);
  const auto one = plan_tensor(g, w, {1});
  const auto p = plan_tensor(g, w, {1, 2});
  EXPECT_TRUE(p.fallbacks.empty());
  for (int l = 0; l < d.n_layer; ++l) EXPECT_EQ(p.collectives_in_layer(l), 2) << "layer " << l;
  for (int l = 0; l < d.n_layer; ++l) {
    int64_t ff = 0;
    for (const auto& dg : p.devices)
      for (const auto& n : dg.nodes)
        if (n.layer == l && n.label == "ffn_gate") ff += n.width;
    EXPECT_EQ(ff, d.n_ff_of(l)) << "layer " << l << ": the devices' rows make up its width";
  }
  for (const auto& dg : p.devices) {
    int shared = 0, per_layer = 0;
    for (const auto& n : dg.nodes) {
      if (n.op == LocalOp::Attention && !d.owns_kv(n.layer)) {
        EXPECT_EQ(n.inputs.size(), 1u);
        ++shared;
      }
      if (n.op == LocalOp::Slice || n.label == "per_layer_gate") {
        EXPECT_EQ(n.width, 16) << "whole on every device";
        ++per_layer;
      }
    }
    EXPECT_EQ(shared, 2);
    EXPECT_EQ(per_layer, 3 * d.n_layer);
  }
  // KV values: only the layers holding a cache count.
  EXPECT_EQ(one.devices[0].kv_values_per_token, static_cast<uint64_t>(2 * (d.n_layer - 2) * d.n_head_kv * d.head_dim));
  // A layer split keeps the last two layers with layer 0's cache: every layer on device 1.
  const auto layers = plan_layers(g, w, {1, 1});
  EXPECT_TRUE(layers.layers[0].empty());
  EXPECT_EQ(layers.layers[1].begin, 0);
  d.kv_source[d.n_layer - 1] = d.kv_source[d.n_layer - 2] = 2;  // the boundary moves down to layer 2
  const auto g2 = model::build_llama_graph(c);
  const auto p2 = plan_layers(g2, weights(g2, DType::F32), {1, 1});
  EXPECT_EQ(p2.layers[0].end, 2);
  EXPECT_EQ(p2.layers[1].begin, 2);
  // Each device computes the per-layer inputs of its own layers from the tokens: device 1 its own
  // embedding rows and projection, and its layers read them, not the residual it is handed.
  for (const auto& dg : p2.devices) {
    int slices = 0, embeds = 0;
    for (const auto& n : dg.nodes) {
      slices += n.op == LocalOp::Slice;
      embeds += n.op == LocalOp::Embed;
    }
    EXPECT_EQ(slices, 2 * (dg.device == 0 ? 2 : d.n_layer - 2)) << "device " << dg.device;
    EXPECT_EQ(embeds, 2) << "device " << dg.device << ": token and per-layer rows";
  }
  EXPECT_EQ(p2.devices[1].nodes.front().op, LocalOp::Input);
}

}  // namespace
}  // namespace weft::parallel
