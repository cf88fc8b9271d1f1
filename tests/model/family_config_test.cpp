// Gemma 3, Gemma 4 and Phi-3 hyper-parameters: what read_config takes from each family's keys and tensors
// (gen-model writes them as the released files do), and the clear error a malformed file gets.
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "runtime/engine.h"
#include "tools/gen_model.h"

#include "support/config_of.h"
#include "support/edited_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace weft::model {
namespace {

using test_support::config_of;
using test_support::Edit;
using test_support::edited;

std::vector<uint8_t> tiny(const std::string& arch) {
  tools::GenModelOptions o;
  o.arch = arch;
  o.type = "f32";
  return tools::generate_model_bytes(o);
}

TEST(FamilyConfig, Gemma3) {
  const auto c = config_of(tiny("gemma3"));
  EXPECT_TRUE(c.traits.gemma && c.traits.qk_norm && c.traits.rope_neox);
  EXPECT_FLOAT_EQ(c.dims.embd_scale, 8.f);                // sqrt(n_embd 64)
  EXPECT_FLOAT_EQ(c.dims.attention_scale(0), 1.f / 4.f);  // 1/sqrt(head_dim 16)
  EXPECT_EQ(c.dims.n_swa, 64);                            // gen-model's default for a context of 512: an eighth
  ASSERT_EQ(c.dims.swa_layers.size(), 2u);
  EXPECT_TRUE(c.dims.is_swa(0));  // the pattern gen-model writes for fewer than 6 layers: every other is global
  EXPECT_FALSE(c.dims.is_swa(1));
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).freq_base, 10000.f);  // rope.freq_base_swa's default
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_base, 1e6f);
  EXPECT_EQ(c.dims.first_key(0, 100), 37);  // a window of 64 ending at position 100
  EXPECT_EQ(c.dims.first_key(1, 100), 0);
  EXPECT_EQ(c.dims.logit_softcap, 0.f);
}

// Gemma 4 as gen-model writes it (released files' keys): every other layer global, those without
// attn_v, scores unscaled, proportional RoPE on the global layers only, each layer's output scale.
TEST(FamilyConfig, Gemma4) {
  const auto c = config_of(tiny("gemma4"));
  EXPECT_TRUE(c.traits.gemma && c.traits.gemma4 && c.traits.qk_norm);
  EXPECT_FLOAT_EQ(c.dims.embd_scale, 8.f);
  EXPECT_FLOAT_EQ(c.dims.attention_scale(0), 1.f);
  EXPECT_FLOAT_EQ(c.dims.logit_softcap, 30.f);
  ASSERT_EQ(c.dims.swa_layers.size(), 2u);
  EXPECT_TRUE(c.dims.is_swa(0));
  EXPECT_FALSE(c.dims.is_swa(1));
  EXPECT_EQ(c.k_as_v, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(c.out_scale, (std::vector<uint8_t>{1, 1}));
  EXPECT_TRUE(c.dims.rope_of(0).freq_factors.empty());
  ASSERT_EQ(c.dims.rope_of(1).freq_factors.size(), 8u);
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_factors[1], 1.f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_factors[2], 1e30f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).freq_base, 10000.f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_base, 1e6f);
}

// Gemma 4's released shape: the global layers' heads wider and fewer of them KV heads.
TEST(FamilyConfig, Gemma4HeadsPerLayer) {
  tools::GenModelOptions o;
  o.arch = "gemma4";
  o.type = "f32";
  o.overrides.head_dim = 32;
  o.overrides.head_dim_swa = 16;
  o.overrides.n_head_kv = 1;
  o.overrides.n_head_kv_swa = 2;
  const auto c = config_of(tools::generate_model_bytes(o));
  const auto& d = c.dims;
  EXPECT_EQ(d.head_dim, 32);
  EXPECT_EQ(d.n_head_kv, 1);
  EXPECT_EQ(d.layer_heads, (std::vector<graph::Dims::LayerHeads>{{2, 16}, {1, 32}}));
  EXPECT_EQ(d.head_dim_of(0), 16);
  EXPECT_EQ(d.group_of(0), 2);
  EXPECT_EQ(d.group_of(1), 4);
  EXPECT_EQ(d.rope_of(0).n_rot, 16);
  EXPECT_EQ(d.rope_of(1).n_rot, 32);
  EXPECT_EQ(d.rope_of(1).freq_factors.size(), 16u);
}

TEST(FamilyConfig, Phi3AndItsLongRopeFactors) {
  const auto bytes = tiny("phi3");
  const auto c = config_of(bytes);
  EXPECT_TRUE(c.traits.phi3 && c.fused_qkv && !c.output_bias);
  EXPECT_EQ(c.rope_original_ctx, 256);
  ASSERT_EQ(c.dims.rope.freq_factors.size(), 8u);  // n_rot / 2
  EXPECT_LT(c.dims.rope.freq_factors.back(), 1.5f) << "the short factors by default";
  EXPECT_NEAR(c.dims.rope.attn_factor, 1.19024f, 1e-5);
  EXPECT_EQ(for_context(c, 256).dims.rope.freq_factors, c.dims.rope.freq_factors) << "not past the original";
  EXPECT_FLOAT_EQ(for_context(c, 257).dims.rope.freq_factors.back(), 31.f) << "past it: the long ones";
}

// final_logit_softcapping (Gemma 2's, which a Gemma 3 file may set): the engine's logits are
// cap * tanh(logits / cap) of the uncapped model's, on one device and split by vocabulary.
TEST(FamilyConfig, SoftCapShapesTheLogits) {
  const auto plain = tiny("gemma3");
  const auto capped = edited(plain, {.f32_keys = {{"gemma3.final_logit_softcapping", 0.5f}}});
  const std::vector<Token> prompt{1, 17, 250, 3, 99};
  auto logits = [&](const std::vector<uint8_t>& bytes, int n_devices) {
    auto f = gguf::File::parse(bytes.data(), bytes.size());
    runtime::EngineOptions eo;
    for (int i = 0; i < n_devices; ++i) eo.devices.push_back({device::DeviceSpec::Kind::Cpu, 1, -1, ""});
    eo.mode = n_devices > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
    eo.n_ctx = 64;
    runtime::Engine e(*f, eo);
    return e.eval_logits(prompt);
  };
  EXPECT_FLOAT_EQ(config_of(capped).dims.logit_softcap, 0.5f);
  const auto want = logits(plain, 1);
  for (int n : {1, 3}) {
    const auto got = logits(capped, n);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - 0.5 * std::tanh(want[i] / 0.5)));
    EXPECT_LT(worst, 1e-4 * 0.5) << n << " devices";  // kLogitRelTol of the cap: a split adds in another order
    EXPECT_LE(*std::max_element(got.begin(), got.end()), 0.5f);
  }
}

// YaRN (rope.scaling.type "yarn"), as llama.cpp sets it up for the llama and qwen families.
TEST(FamilyConfig, YarnRope) {
  tools::GenModelOptions o;
  o.arch = "qwen3";
  o.type = "f32";
  o.rope_scaling = "yarn";
  const auto bytes = tools::generate_model_bytes(o);
  const auto r = config_of(bytes).dims.rope;
  EXPECT_FLOAT_EQ(r.freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(r.yarn_ext_factor, 1.f);
  EXPECT_FLOAT_EQ(r.yarn_orig_ctx, 128.f);  // a quarter of the tiny file's 512
  EXPECT_FLOAT_EQ(r.yarn_beta_fast, 32.f);
  EXPECT_FLOAT_EQ(r.yarn_beta_slow, 1.f);
  EXPECT_ERROR(config_of(edited(bytes, {.f32_keys = {{"qwen3.rope.scaling.yarn_log_multiplier", 0.1f}}})),
               "yarn_log_multiplier (DeepSeek's YaRN) is read for deepseek2 only");
  EXPECT_ERROR(config_of(edited(bytes, {.f32_keys = {{"qwen3.rope.scaling.yarn_beta_fast", -1.f}}})),
               "rope.scaling yarn parameter -1 is out of range");
}

std::vector<uint8_t> tiny_gpt_oss() {
  tools::GenModelOptions o;
  o.arch = "gpt-oss";
  o.preset = "tiny-moe";
  o.type = "f32";
  return tools::generate_model_bytes(o);
}

TEST(FamilyConfig, GptOss) {
  const auto c = config_of(tiny_gpt_oss());
  EXPECT_TRUE(c.traits.gpt_oss && c.traits.qkv_bias && c.traits.rope_neox && c.traits.moe);
  EXPECT_EQ(c.dims.n_expert, 8);
  EXPECT_EQ(c.dims.n_expert_used, 2);
  EXPECT_EQ(c.dims.n_ff_exp, 96);
  EXPECT_EQ(c.dims.expert_gating, graph::Dims::Gating::SoftmaxSelected);
  EXPECT_FALSE(c.dims.expert_weights_norm);
  EXPECT_EQ(c.dims.n_swa, 64);    // an eighth of the context of 512
  EXPECT_TRUE(c.dims.is_swa(0));  // every other layer from the first (pattern 2, llama.cpp's default)
  EXPECT_FALSE(c.dims.is_swa(1));
  // YaRN on both kinds of layers (llama.cpp keeps gpt-oss's scale for its sliding-window layers)
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).freq_base, 150000.f);
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).yarn_ext_factor, 1.f);
}

TEST(FamilyConfig, MalformedFilesAreNamed) {
  const auto oss = tiny_gpt_oss();
  EXPECT_ERROR(config_of(edited(oss, {.tensors = {{"blk.1.attn_sinks.weight", std::nullopt}}})),
               "attention sinks tensor 'blk.1.attn_sinks.weight' is missing");
  EXPECT_ERROR(config_of(edited(oss, {.tensors = {{"blk.0.attn_sinks.weight", std::vector<int64_t>{2}}}})),
               "attention sinks tensor 'blk.0.attn_sinks.weight' is [2], the hyper-parameters need [4]");
  EXPECT_ERROR(config_of(edited(oss, {.tensors = {{"blk.0.ffn_down_exps.bias", std::vector<int64_t>{64, 4}}}})),
               "expert bias tensor 'blk.0.ffn_down_exps.bias' is [64, 4], the hyper-parameters need [64, 8]");
  EXPECT_ERROR(config_of(edited(oss, {.tensors = {{"blk.1.ffn_gate_inp.bias", std::nullopt}}})),
               "router bias tensor 'blk.1.ffn_gate_inp.bias' is missing");
  EXPECT_ERROR(config_of(edited(oss, {.keys = {{"gpt-oss.attention.sliding_window", 4096}}})),
               "gpt-oss.attention.sliding_window 4096 is out of range (0..context_length 512)");
  const auto phi3 = tiny("phi3");
  EXPECT_ERROR(config_of(edited(phi3, {.tensors = {{"blk.1.ffn_up.weight", std::vector<int64_t>{64, 160}}}})),
               "fused gate/up tensor 'blk.1.ffn_up.weight' is [64, 160], the hyper-parameters need [64, 320]");
  EXPECT_ERROR(config_of(edited(phi3, {.tensors = {{"blk.0.attn_qkv.weight", std::vector<int64_t>{64, 64}}}})),
               "fused q/k/v tensor 'blk.0.attn_qkv.weight' is [64, 64], the hyper-parameters need [64, 128]");
  EXPECT_ERROR(config_of(edited(phi3, {.tensors = {{"rope_factors_long.weight", std::vector<int64_t>{7}}}})),
               "rope_factors_long.weight must be f32[8]");
  const auto gemma = tiny("gemma3");
  EXPECT_ERROR(config_of(edited(gemma, {.tensors = {{"blk.1.post_ffw_norm.weight", std::nullopt}}})),
               "post-FFN norm tensor 'blk.1.post_ffw_norm.weight' is missing");
  EXPECT_ERROR(config_of(edited(gemma, {.keys = {{"gemma3.attention.sliding_window", 4096}}})),
               "gemma3.attention.sliding_window 4096 is out of range (0..context_length 512)");
  EXPECT_ERROR(config_of(edited(gemma, {.keys = {{"gemma3.attention.sliding_window_pattern", 9}}})),
               "gemma3.attention.sliding_window_pattern 9 is out of range (0..3)");
  const auto g4 = tiny("gemma4");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"rope_freqs.weight", std::nullopt}}})),
               "rope_freqs.weight (f32[8]) is missing: Gemma 4's global layers need it");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"rope_freqs.weight", std::vector<int64_t>{4}}}})),
               "rope_freqs.weight must be f32[8]");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.attention.sliding_window_pattern", std::nullopt}}})),
               "gemma4.attention.sliding_window_pattern is missing");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.attention.sliding_window", 4096}}})),
               "gemma4.attention.sliding_window 4096 is out of range (1..context_length 512)");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.1.layer_output_scale.weight", std::vector<int64_t>{2}}}})),
               "blk.1.layer_output_scale.weight must be f32[1]");
  EXPECT_EQ(config_of(edited(g4, {.tensors = {{"blk.1.layer_output_scale.weight", std::nullopt}}})).out_scale,
            (std::vector<uint8_t>{1, 0}));  // optional, as llama.cpp reads it
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.embedding_length_per_layer_input", 16}}})),
               "per-layer token embedding tensor 'per_layer_token_embd.weight' is missing");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.attention.shared_kv_layers", 1}}})),
               "gemma4.attention.shared_kv_layers 1 is out of range (0..0)");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.attention.key_length_swa", 8}}})),
               "gemma4.attention.value_length_swa 16 != key_length_swa 8 is not supported");
  EXPECT_ERROR(config_of(edited(g4, {.keys = {{"gemma4.attention.key_length_swa", 8},
                                              {"gemma4.attention.value_length_swa", 8},
                                              {"gemma4.rope.dimension_count_swa", 8}}})),
               "q norm tensor 'blk.0.attn_q_norm.weight' is [16], the hyper-parameters need [8]");
  // Released Gemma 4 files list a head count per layer: one repeated is one count, differing ones
  // are the layers' own.
  EXPECT_EQ(config_of(edited(g4, {.i32_arrays = {{"gemma4.attention.head_count_kv", {2, 2}}}})).dims.n_head_kv, 2);
  const auto per_layer = config_of(edited(g4, {.i32_arrays = {{"gemma4.attention.head_count_kv", {2, 1}}}}));
  EXPECT_EQ(per_layer.dims.n_head_kv, 1);  // the global layer's
  EXPECT_EQ(per_layer.dims.layer_heads, (std::vector<graph::Dims::LayerHeads>{{2, 16}, {1, 16}}));
  EXPECT_ERROR(config_of(edited(g4, {.i32_arrays = {{"gemma4.attention.head_count_kv", {2, 3}}}})),
               "gemma4.attention.head_count_kv 3 (layer 1) does not divide head_count 4");
  EXPECT_ERROR(config_of(edited(g4, {.i32_arrays = {{"gemma4.attention.head_count_kv", {2, 2, 2}}}})),
               "gemma4.attention.head_count_kv has 3 values for 2 layers");
  EXPECT_EQ(config_of(edited(g4, {.i32_arrays = {{"gemma4.feed_forward_length", {128, 256}}}})).dims.layer_ff,
            (std::vector<int64_t>{128, 256}));
  EXPECT_ERROR(config_of(edited(g4, {.i32_arrays = {{"gemma4.feed_forward_length", {128, 256, 256}}}})),
               "gemma4.feed_forward_length has 3 values for 2 layers");
  EXPECT_ERROR(config_of(edited(tiny("gemma3"), {.i32_arrays = {{"gemma3.feed_forward_length", {128, 256}}}})),
               "gemma3.feed_forward_length differs between layers (128, 256)");
  EXPECT_ERROR(config_of(edited(g4, {.tensors = {{"blk.0.post_attention_norm.weight", std::nullopt}}})),
               "post-attention norm tensor 'blk.0.post_attention_norm.weight' is missing");
}

// Gemma 4 E2B's layout: per-layer FFN widths (the KV-sharing layers' twice as wide), the last two
// layers reading the caches of the last sliding-window and global layers before them, per-layer inputs.
TEST(FamilyConfig, Gemma4E2bLayout) {
  tools::GenModelOptions o;
  o.arch = "gemma4";
  o.type = "f32";
  o.overrides = {.n_layer = 4, .n_embd_per_layer = 16, .n_kv_shared = 2};
  const auto e2b = tools::generate_model_bytes(o);
  const auto& d = config_of(e2b).dims;
  EXPECT_EQ(d.layer_ff, (std::vector<int64_t>{160, 160, 320, 320}));
  EXPECT_EQ(d.kv_source, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_FALSE(d.owns_kv(2));
  EXPECT_EQ(d.n_embd_per_layer, 16);
  EXPECT_ERROR(config_of(edited(e2b, {.keys = {{"gemma4.attention.shared_kv_layers", 3}}})),
               "gemma4.attention.shared_kv_layers 3 is out of range (0..2)");
  EXPECT_ERROR(config_of(edited(e2b, {.keys = {{"gemma4.attention.shared_kv_layers", 1}}})),
               "layer 3 shares the KV cache of layer 2, which is not a layer of its kind and heads");
  EXPECT_ERROR(config_of(edited(e2b, {.i32_arrays = {{"gemma4.feed_forward_length", {160, 320}}}})),
               "gemma4.feed_forward_length has 2 values for 4 layers");
  EXPECT_ERROR(config_of(edited(e2b, {.i32_arrays = {{"gemma4.feed_forward_length", {160, 0, 320, 320}}}})),
               "gemma4.feed_forward_length: 0 is out of range");
  EXPECT_ERROR(config_of(edited(e2b, {.keys = {{"gemma4.embedding_length_per_layer_input", 8}}})),
               "per-layer token embedding tensor 'per_layer_token_embd.weight' is [64, 320], the hyper-parameters need "
               "[32, 320]");
  EXPECT_ERROR(config_of(edited(e2b, {.tensors = {{"per_layer_model_proj.weight", std::vector<int64_t>{64, 32}}}})),
               "per-layer input projection tensor 'per_layer_model_proj.weight' is [64, 32]");
  EXPECT_ERROR(config_of(edited(e2b, {.tensors = {{"blk.3.inp_gate.weight", std::nullopt}}})),
               "per-layer input gate tensor 'blk.3.inp_gate.weight' is missing");
  EXPECT_ERROR(config_of(edited(e2b, {.tensors = {{"blk.0.attn_k_norm.weight", std::nullopt}}})),
               "k norm tensor 'blk.0.attn_k_norm.weight' is missing");
}

}  // namespace
}  // namespace weft::model
