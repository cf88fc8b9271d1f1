// Gemma 3 and Phi-3 hyper-parameters: what read_config takes from each family's keys and tensors
// (gen-model writes them as the released files do), and the clear error a malformed file gets.
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tools/gen_model.h"

#include "support/edited_model.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace weft::model {
namespace {

using test_support::Edit;
using test_support::edited;

std::vector<uint8_t> tiny(const std::string& arch) {
  tools::GenModelOptions o;
  o.arch = arch;
  o.type = "f32";
  return tools::generate_model_bytes(o);
}

ModelConfig config_of(const std::vector<uint8_t>& bytes) {
  auto f = gguf::File::parse(bytes.data(), bytes.size());
  return read_config(*f);
}

TEST(FamilyConfig, Gemma3) {
  const auto c = config_of(tiny("gemma3"));
  EXPECT_TRUE(c.traits.gemma && c.traits.qk_norm && c.traits.rope_neox);
  EXPECT_FLOAT_EQ(c.dims.embd_scale, 8.f);               // sqrt(n_embd 64)
  EXPECT_FLOAT_EQ(c.dims.attention_scale(), 1.f / 4.f);  // 1/sqrt(head_dim 16)
  EXPECT_EQ(c.dims.n_swa, 64);                           // gen-model's default for a context of 512: an eighth
  ASSERT_EQ(c.dims.swa_layers.size(), 2u);
  EXPECT_TRUE(c.dims.is_swa(0));  // the pattern gen-model writes for fewer than 6 layers: every other is global
  EXPECT_FALSE(c.dims.is_swa(1));
  EXPECT_FLOAT_EQ(c.dims.rope_of(0).freq_base, 10000.f);  // rope.freq_base_swa's default
  EXPECT_FLOAT_EQ(c.dims.rope_of(1).freq_base, 1e6f);
  EXPECT_EQ(c.dims.first_key(0, 100), 37);  // a window of 64 ending at position 100
  EXPECT_EQ(c.dims.first_key(1, 100), 0);
  EXPECT_EQ(c.dims.logit_softcap, 0.f);
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

TEST(FamilyConfig, MalformedFilesAreNamed) {
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
}

}  // namespace
}  // namespace weft::model
