// Mixture-of-experts hyper-parameters: what read_config takes from each architecture's keys, and
// the clear error a malformed file gets (a count out of range, a missing router, expert tensors of
// the wrong shape), each naming the key or tensor.
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "tools/gen_model.h"

#include "support/config_of.h"
#include "support/edited_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

namespace weft::model {
namespace {

using test_support::config_of;
using test_support::Edit;
using test_support::edited;

std::vector<uint8_t> tiny_moe(const std::string& arch) {
  tools::GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = arch;
  o.type = "f32";
  return tools::generate_model_bytes(o);
}

TEST(MoeConfig, ReadsEachArchitecturesExperts) {
  const auto q3 = config_of(tiny_moe("qwen3moe"));
  EXPECT_EQ(q3.dims.n_expert, 8);
  EXPECT_EQ(q3.dims.n_expert_used, 2);
  EXPECT_EQ(q3.dims.n_ff_exp, 96);
  EXPECT_EQ(q3.dims.n_ff_shexp, 0);
  EXPECT_TRUE(q3.dims.expert_weights_norm);
  const auto q2 = config_of(tiny_moe("qwen2moe"));
  EXPECT_EQ(q2.dims.n_ff_shexp, 128);
  EXPECT_FALSE(q2.dims.expert_weights_norm) << "llama.cpp's qwen2moe does not renormalise";
  const auto mixtral = config_of(tiny_moe("llama"));
  EXPECT_EQ(mixtral.dims.n_ff_exp, 96) << "Mixtral's experts are feed_forward_length wide";
  EXPECT_TRUE(mixtral.dims.expert_weights_norm);
  EXPECT_TRUE(mixtral.traits.moe);
  // Without expert_feed_forward_length, llama.cpp's fallback: feed_forward_length / expert_used_count.
  const auto fallback =
      config_of(edited(tiny_moe("qwen3moe"), {.keys = {{"qwen3moe.expert_feed_forward_length", {}}}}));
  EXPECT_EQ(fallback.dims.n_ff_exp, 192 / 2);
}

TEST(MoeConfig, MalformedMetadataIsAClearError) {
  const auto q3 = tiny_moe("qwen3moe");
  EXPECT_ERROR(config_of(edited(q3, {.keys = {{"qwen3moe.expert_used_count", 9}}})),
               "qwen3moe.expert_used_count 9 is out of range: must be 1..expert_count (8)");
  EXPECT_ERROR(config_of(edited(q3, {.keys = {{"qwen3moe.expert_used_count", 0}}})),
               "qwen3moe.expert_used_count 0 is out of range");
  EXPECT_ERROR(config_of(edited(q3, {.keys = {{"qwen3moe.expert_count", {}}}})),
               "qwen3moe.expert_count is missing or 0: qwen3moe is a mixture of experts");
  EXPECT_ERROR(config_of(edited(q3, {.keys = {{"qwen3moe.expert_count", 1000}}})),
               "qwen3moe.expert_count 1000 is out of range (1..512)");
  EXPECT_ERROR(config_of(edited(q3, {.tensors = {{"blk.1.ffn_gate_inp.weight", {}}}})),
               "router tensor 'blk.1.ffn_gate_inp.weight' is missing");
  EXPECT_ERROR(config_of(edited(q3, {.tensors = {{"blk.0.ffn_down_exps.weight", std::vector<int64_t>{96, 64, 7}}}})),
               "expert tensor 'blk.0.ffn_down_exps.weight' is [96, 64, 7], the hyper-parameters need [96, 64, 8]");
  EXPECT_ERROR(config_of(edited(q3, {.tensors = {{"blk.0.ffn_up_exps.weight", std::vector<int64_t>{64, 64, 8}}}})),
               "expert tensor 'blk.0.ffn_up_exps.weight' is [64, 64, 8], the hyper-parameters need [64, 96, 8]");
  EXPECT_ERROR(config_of(edited(q3, {.keys = {{"qwen3moe.expert_feed_forward_length", 64}}})),
               "expert tensor 'blk.0.ffn_gate_exps.weight' is [64, 96, 8], the hyper-parameters need [64, 64, 8]");
  const auto q2 = tiny_moe("qwen2moe");
  EXPECT_ERROR(config_of(edited(q2, {.tensors = {{"blk.0.ffn_gate_inp_shexp.weight", {}}}})),
               "shared expert gate tensor 'blk.0.ffn_gate_inp_shexp.weight' is missing");
  // A dense llama that names experts used but has none.
  tools::GenModelOptions dense;
  const auto llama = tools::generate_model_bytes(dense);
  EXPECT_ERROR(config_of(edited(llama, {.keys = {{"llama.expert_used_count", 2}}})),
               "llama.expert_used_count is 2 without experts");
  EXPECT_ERROR(config_of(edited(llama, {.keys = {{"llama.expert_count", 4}, {"llama.expert_used_count", 2}}})),
               "router tensor 'blk.0.ffn_gate_inp.weight' is missing");
}

// Gemma 4's 26B-A4B layout: experts' gate and up in one stack, a scale per expert, the dense FFN
// beside them with its own norms, the router's input scale; each one missing or misshapen is an
// error naming it, and a router without expert_count is not run as a dense model.
TEST(MoeConfig, Gemma4ExpertsBesideTheDenseFfn) {
  const auto g4 = tiny_moe("gemma4");
  const auto c = config_of(g4);
  EXPECT_TRUE(c.fused_gate_up_exps);
  EXPECT_TRUE(c.expert_out_scale);
  EXPECT_TRUE(c.dims.expert_weights_norm);
  EXPECT_EQ(c.dims.n_ff, 192);
  EXPECT_EQ(c.dims.n_ff_exp, 96);
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.1.ffn_gate_up_exps.weight", std::vector<int64_t>{64, 96, 8}}}})),
               "fused gate/up expert tensor 'blk.1.ffn_gate_up_exps.weight' is [64, 96, 8], the hyper-parameters need "
               "[64, 192, 8]");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.0.ffn_down_exps.scale", std::vector<int64_t>{7}}}})),
               "per-expert output scale tensor 'blk.0.ffn_down_exps.scale' is [7], the hyper-parameters need [8]");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.1.ffn_gate_inp.scale", {}}}})),
               "router input scale tensor 'blk.1.ffn_gate_inp.scale' is missing");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.0.post_ffw_norm_2.weight", {}}}})),
               "expert branch norm tensor 'blk.0.post_ffw_norm_2.weight' is missing");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.1.ffn_down.weight", {}}}})),
               "dense FFN tensor 'blk.1.ffn_down.weight' is missing");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.expert_count", {}}, {"gemma4.expert_used_count", {}}}})),
               "blk.0.ffn_gate_inp.weight is a router, but gemma4.expert_count is missing or 0");
}

// DeepSeek V3's layout (deepseek2, MLA form): the latent attention's widths and the routing's keys
// are read as llama.cpp reads them, and a file of the older attn_kv_b layout, a misshapen head
// matrix or impossible groups are errors naming the key or tensor.
TEST(MoeConfig, DeepSeekLatentAttentionAndGroupedRouting) {
  const auto ds = tiny_moe("deepseek2");
  const auto c = config_of(ds);
  EXPECT_TRUE(c.traits.deepseek);
  EXPECT_EQ(c.dims.head_dim, 48);  // key_length_mla: 32 unrotated + 16 rotated
  EXPECT_EQ(c.dims.kv_lora_rank, 64);
  EXPECT_EQ(c.dims.v_head_dim, 32);
  EXPECT_EQ(c.dims.rope.n_rot, 16);
  EXPECT_FALSE(c.dims.rope.neox);
  EXPECT_EQ(c.q_lora_rank, 32);
  EXPECT_EQ(c.dims.n_layer_dense_lead, 1);
  EXPECT_FALSE(c.dims.has_experts(0));
  EXPECT_TRUE(c.dims.has_experts(1));
  EXPECT_EQ(c.dims.n_ff_shexp, 96);  // one shared expert of the experts' width
  EXPECT_EQ(c.dims.expert_gating, graph::Dims::Gating::Sigmoid);
  EXPECT_TRUE(c.expert_selection_bias);
  EXPECT_TRUE(c.dims.expert_weights_norm);
  EXPECT_FLOAT_EQ(c.dims.expert_weights_scale, 2.5f);
  EXPECT_EQ(c.dims.n_expert_groups, 4);
  EXPECT_EQ(c.dims.n_group_used, 2);
  EXPECT_FLOAT_EQ(c.dims.attention_scale(0), 1.f / std::sqrt(48.f));
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.attention.key_length_mla", {}}}})),
               "deepseek2.attention.key_length_mla is missing: DeepSeek files of the attn_kv_b layout");
  EXPECT_ERROR(
      config_of(edited(ds, {.tensors = {{"blk.2.attn_k_b.weight", std::vector<int64_t>{32, 64, 3}}}})),
      "key up-projection tensor 'blk.2.attn_k_b.weight' is [32, 64, 3], the hyper-parameters need [32, 64, 4]");
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.attention.key_length", 96}}})),
               "deepseek2.attention.key_length 96 is not kv_lora_rank + rope.dimension_count (80)");
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.expert_group_count", 3}}})),
               "deepseek2.expert_group_count 3 does not divide expert_count 8");
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.expert_group_used_count", 4}}})),
               "deepseek2.expert_group_used_count 4 is out of range (1..3)");
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.expert_gating_func", 3}}})),
               "deepseek2.expert_gating_func 3 is not supported");
  EXPECT_ERROR(config_of(edited(ds, {.keys = {{"deepseek2.leading_dense_block_count", 3}}})),
               "deepseek2.leading_dense_block_count 3 is out of range (0..2)");
  EXPECT_ERROR(config_of(edited(ds, {.tensors = {{"blk.0.ffn_down.weight", {}}}})),
               "dense FFN tensor 'blk.0.ffn_down.weight' is missing");
  EXPECT_ERROR(config_of(edited(ds, {.tensors = {{"blk.2.exp_probs_b.bias", {}}}})),
               "expert selection bias tensor 'blk.2.exp_probs_b.bias' is missing");
}

}  // namespace
}  // namespace weft::model
