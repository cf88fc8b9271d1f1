// The planner on synthetic mixture-of-experts graphs (qwen3moe-, qwen2moe-shaped): one all-reduce
// per MoE block in both splits, expert slices that add up to the whole stacks, whole experts in
// proportion to the ratios, and the automatic choice between the two splits.
#include "parallel/planner.h"
#include "parallel/synthetic_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <numeric>

namespace weft::parallel {
namespace {

using synthetic::config;
using synthetic::Shape;
using synthetic::weights;

// {n_embd, n_layer, n_ff, n_head, n_head_kv, n_vocab, type, qwen3, n_expert, used, n_ff_exp, shexp}
const Shape kQwen3Moe{2048, 2, 6144, 32, 4, 32000, DType::Q4_0, true, 32, 8, 768, 0};
const Shape kQwen2Moe{2048, 2, 5632, 16, 16, 32000, DType::Q8_0, false, 60, 4, 1408, 5632};
const Shape kTinyMoe{64, 2, 192, 4, 2, 320, DType::F32, false, 8, 2, 96, 128};
const Shape kQ4KMoe{2048, 2, 6144, 32, 4, 32000, DType::Q4_K, true, 32, 8, 768, 0};  // 3 K blocks per expert

std::vector<std::vector<double>> moe_ratio_sets() {
  return {{1}, {1, 1}, {3, 1}, {1, 2, 3}, {1, 1, 1, 1}, {5, 1, 2, 1, 3}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 0, 1}};
}

bool is_expert(LocalOp op) { return op == LocalOp::ExpertMatMul || op == LocalOp::ExpertMatMulSum; }

TEST(PlannerMoe, OneAllReducePerMoeBlockInBothSplits) {
  for (const Shape& s : {kQwen3Moe, kQwen2Moe, kTinyMoe}) {
    const auto g = model::build_llama_graph(config(s));
    for (MoeSplit m : {MoeSplit::Tensor, MoeSplit::Expert}) {
      for (const auto& r : moe_ratio_sets()) {
        const auto p = plan_tensor(g, weights(g, s.type), r, m);
        EXPECT_TRUE(p.fallbacks.empty()) << p.fallbacks.front();
        for (int l = 0; l < s.n_layer; ++l) {  // attention output, and the experts (+ shared expert)
          EXPECT_EQ(p.collectives_in_layer(l), r.size() > 1 ? 2 : 0) << moe_split_name(m) << " " << r.size();
          for (const auto& c : p.collectives)
            if (c.layer == l) {
              EXPECT_EQ(c.op, LocalOp::AllReduce);
            }
        }
        if (r.size() > 1) {
          EXPECT_EQ(p.moe_split, m);
        }
      }
    }
  }
}

// Bytes of each device's slices of one stacked tensor.
std::vector<uint64_t> expert_bytes(const Plan& p, const graph::WeightTable& w, const std::string& name) {
  std::vector<uint64_t> out;
  for (const auto& dg : p.devices) {
    uint64_t b = 0;
    for (const auto& n : dg.nodes)
      if (is_expert(n.op) && n.weight.tensor == name) b += slice_bytes(w.at(name), n.weight);
    out.push_back(b);
  }
  return out;
}

TEST(PlannerMoe, ExpertSlicesAddUpAndFollowTheRatios) {
  const auto g = model::build_llama_graph(config(kQwen3Moe));
  const auto w = weights(g, kQwen3Moe.type);
  for (MoeSplit m : {MoeSplit::Tensor, MoeSplit::Expert}) {
    for (const auto& r : moe_ratio_sets()) {
      const auto p = plan_tensor(g, w, r, m);
      const double total = std::accumulate(r.begin(), r.end(), 0.0);
      for (const char* t : {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight"}) {
        const auto& info = w.at(t);
        const uint64_t whole = slice_bytes(info, {t, WeightSlice::Kind::Whole, {}, {}});
        const auto b = expert_bytes(p, w, t);
        EXPECT_EQ(std::accumulate(b.begin(), b.end(), uint64_t{0}), whole) << t << " " << moe_split_name(m);
        // Off the ratio by at most one unit: an expert (expert split) or a quant block of every expert.
        const double unit = m == MoeSplit::Expert ? whole / 32.0 : whole * 32.0 / 768;
        for (size_t d = 0; d < r.size(); ++d) EXPECT_NEAR(static_cast<double>(b[d]), whole * r[d] / total, unit) << d;
      }
    }
  }
}

TEST(PlannerMoe, ExpertSplitHoldsWholeExpertsEvenWithMoreDevicesThanExperts) {
  Shape s = kTinyMoe;
  s.n_expert = 4;
  s.n_expert_used = 2;
  const auto g = model::build_llama_graph(config(s));
  const auto p = plan_tensor(g, weights(g, s.type), std::vector<double>(8, 1.0), MoeSplit::Expert);
  ASSERT_EQ(p.experts.size(), 8u);
  std::vector<int> held(4, 0);
  int idle = 0;
  for (size_t d = 0; d < 8; ++d) {
    for (int64_t e = p.experts[d].begin; e < p.experts[d].end; ++e) held[e]++;
    idle += p.experts[d].empty();
    for (const auto& n : p.devices[d].nodes) {
      if (!is_expert(n.op)) continue;
      EXPECT_EQ(n.experts, p.experts[d]) << n.label;
      EXPECT_EQ(n.weight.kind == WeightSlice::Kind::None, p.experts[d].empty()) << n.label;
      if (n.op == LocalOp::ExpertMatMul) {
        EXPECT_EQ(n.width, p.experts[d].empty() ? 0 : 2 * 96);
      }
    }
  }
  for (int c : held) EXPECT_EQ(c, 1) << "each expert on exactly one device";
  EXPECT_EQ(idle, 4);
}

TEST(PlannerMoe, TensorSplitCutsEveryExpertOnBlocks) {
  const auto g = model::build_llama_graph(config(kQ4KMoe));
  const auto p = plan_tensor(g, weights(g, DType::Q4_K), {1, 1, 1}, MoeSplit::Tensor);
  for (const auto& dg : p.devices)
    for (const auto& n : dg.nodes) {
      if (!is_expert(n.op) || n.weight.kind == WeightSlice::Kind::None) continue;
      EXPECT_EQ(n.experts, (Range{0, 32})) << "every expert";
      EXPECT_EQ(n.weight.kind, n.op == LocalOp::ExpertMatMul ? WeightSlice::Kind::Rows : WeightSlice::Kind::Cols);
      EXPECT_EQ(n.weight.range.begin % 256, 0) << n.label;
      EXPECT_EQ(n.weight.range.end % 256, 0) << n.label;
    }
}

TEST(PlannerMoe, AutoPrefersTensorUnlessBlocksAreTooCoarse) {
  const auto g = model::build_llama_graph(config(kQwen3Moe));
  std::string why;
  EXPECT_EQ(choose_moe_split(g, weights(g, DType::Q4_0), {1, 1}, MoeSplit::Auto, &why), MoeSplit::Tensor);
  EXPECT_NE(why.find("balanced"), std::string::npos) << why;
  // 768 features are three Q4_K blocks: two devices get 2:1, whole experts split 16:16.
  const auto gk = model::build_llama_graph(config(kQ4KMoe));
  EXPECT_EQ(choose_moe_split(gk, weights(gk, DType::Q4_K), {1, 1}, MoeSplit::Auto, &why), MoeSplit::Expert);
  EXPECT_NE(why.find("too coarsely"), std::string::npos) << why;
  EXPECT_EQ(choose_moe_split(gk, weights(gk, DType::Q4_K), {1, 1}, MoeSplit::Tensor, &why), MoeSplit::Tensor);
  EXPECT_EQ(choose_moe_split(gk, weights(gk, DType::Q4_K), {1}, MoeSplit::Expert, &why), MoeSplit::Tensor);
}

TEST(PlannerMoe, DecodeReadsOnlyTheSelectedShareOfExperts) {
  const auto g = model::build_llama_graph(config(kQwen3Moe));
  const auto w = weights(g, DType::Q4_0);
  const auto p = plan_tensor(g, w, {1});
  uint64_t experts = 0;
  for (const auto& [name, info] : w)
    if (name.find("_exps") != std::string::npos) experts += slice_bytes(info, {name, WeightSlice::Kind::Whole, {}, {}});
  const auto& dg = p.devices[0];
  // Everything but the embedding table and 24 of every 32 experts' bytes.
  const uint64_t embd = slice_bytes(w.at("token_embd.weight"), {"token_embd.weight", WeightSlice::Kind::Whole, {}, {}});
  EXPECT_EQ(dg.decode_bytes, dg.weight_bytes - embd + embd / 32000 - experts / 32 * 24);
}

TEST(PlannerMoe, RejectsExpertStacksOfTheWrongShape) {
  const auto g = model::build_llama_graph(config(kTinyMoe));
  auto w = weights(g, DType::F32);
  w["blk.1.ffn_up_exps.weight"].mats = 7;
  EXPECT_ERROR(plan_tensor(g, w, {1, 1}), "'blk.1.ffn_up_exps.weight' is 64x96x7, the graph needs 64x96x8");
}

}  // namespace
}  // namespace weft::parallel
