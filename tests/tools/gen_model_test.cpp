// gen-model: every type round-trips through the GGUF reader with the expected tensor set,
// shapes, types and keys; quantized data matches the f32 model of the same seed within each
// type's error bound; output is byte-identical across runs and thread counts.
#include "tools/gen_model.h"

#include "core/error.h"
#include "core/fp16.h"
#include "gguf/gguf_reader.h"
#include "kernels/quants.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace weft::tools {
namespace {

constexpr const char* kTypes[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0",   "q4_1",   "q5_0",   "q5_1",
                                  "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m", "iq4_nl", "iq4_xs"};

// Relative RMS error of a quantized tensor against the f32 original, per stored type. Bounds are
// a little above what each format gives on bell-shaped data (q4_0 ~0.11, q8_0 ~0.004).
double max_rel_rms(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1e-3;
    case DType::BF16: return 5e-3;
    case DType::Q8_0: return 0.01;
    case DType::Q6_K: return 0.03;
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K: return 0.08;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q4_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: return 0.16;  // mxfp4 ~0.117
    case DType::Q3_K: return 0.24;
    case DType::Q2_K: return 0.40;
    default: return 0;
  }
}

struct Parsed {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
};

Parsed make(GenModelOptions o) {
  if (o.n_threads == 0) o.n_threads = 2;
  Parsed p;
  p.bytes = generate_model_bytes(o);
  p.file = gguf::File::parse(p.bytes.data(), p.bytes.size(), "gen_model_test");
  return p;
}

std::vector<float> dequant(const gguf::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  const int64_t ne0 = t.shape[0], rows = t.n_elements() / ne0;
  const size_t rb = row_bytes(t.type, ne0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = t.data + r * rb;
    float* dst = out.data() + r * ne0;
    if (t.type == DType::F32)
      std::memcpy(dst, src, rb);
    else if (t.type == DType::F16 || t.type == DType::BF16) {
      for (int64_t i = 0; i < ne0; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = t.type == DType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
      }
    } else {
      kernels::dequantize_row_ref(t.type, src, dst, ne0);
    }
  }
  return out;
}

// Expected names -> shapes of a llama-family model, written out independently of the generator.
std::map<std::string, std::vector<int64_t>> expected_tensors(const std::string& arch, const GenModelShape& s,
                                                             bool tied) {
  const int64_t hd = s.n_embd / s.n_head, kv = hd * s.n_head_kv;
  std::map<std::string, std::vector<int64_t>> m;
  m["token_embd.weight"] = {s.n_embd, s.n_vocab};
  m["output_norm.weight"] = {s.n_embd};
  if (!tied) m["output.weight"] = {s.n_embd, s.n_vocab};
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    m[b + "attn_norm.weight"] = {s.n_embd};
    m[b + "attn_q.weight"] = {s.n_embd, s.n_embd};
    m[b + "attn_k.weight"] = {s.n_embd, kv};
    m[b + "attn_v.weight"] = {s.n_embd, kv};
    m[b + "attn_output.weight"] = {s.n_embd, s.n_embd};
    m[b + "ffn_norm.weight"] = {s.n_embd};
    m[b + "ffn_gate.weight"] = {s.n_embd, s.n_ff};
    m[b + "ffn_up.weight"] = {s.n_embd, s.n_ff};
    m[b + "ffn_down.weight"] = {s.n_ff, s.n_embd};
    if (arch == "qwen2") {
      m[b + "attn_q.bias"] = {s.n_embd};
      m[b + "attn_k.bias"] = {kv};
      m[b + "attn_v.bias"] = {kv};
    }
    if (arch == "qwen3") {
      m[b + "attn_q_norm.weight"] = {hd};
      m[b + "attn_k_norm.weight"] = {hd};
    }
  }
  return m;
}

void expect_tensor_set(const gguf::File& f, const std::string& arch, const GenModelShape& s, bool tied) {
  const auto want = expected_tensors(arch, s, tied);
  EXPECT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, shape] : want) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    if (shape.size() == 1) {
      EXPECT_EQ(t->type, DType::F32) << name;
    }
  }
}

TEST(GenModel, TinyEveryTypeRoundTrips) {
  GenModelOptions base;
  base.type = "f32";
  const Parsed ref = make(base);
  const GenModelShape s = gen_model_preset("tiny");
  for (const char* type : kTypes) {
    SCOPED_TRACE(type);
    GenModelOptions o;
    o.type = type;
    const Parsed p = make(o);
    const gguf::File& f = *p.file;
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("general.file_type"), gen_file_type(type));
    EXPECT_EQ(f.get_int("general.alignment"), 32);
    EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
    EXPECT_EQ(f.get_int("llama.block_count"), 2);
    EXPECT_EQ(f.get_int("llama.feed_forward_length"), 160);
    EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
    EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 16);
    EXPECT_EQ(f.get_int("llama.vocab_size"), 320);
    EXPECT_EQ(f.get_int("llama.context_length"), 512);
    EXPECT_NEAR(*f.get_float_opt("llama.rope.freq_base"), 10000.0, 1e-3);
    EXPECT_NEAR(*f.get_float_opt("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
    expect_tensor_set(f, "llama", s, false);

    // Tiny rows (64, 160) never fill a 256 super-block: K types fall back as llama.cpp does.
    const std::string ts = type;
    const DType want = ts == "q4_k" || ts == "q4_k_m"                   ? DType::Q5_0
                       : ts == "q5_k" || ts == "q5_k_m"                 ? DType::Q5_1
                       : ts == "q6_k"                                   ? DType::Q8_0
                       : ts == "q2_k" || ts == "q3_k" || ts == "iq4_xs" ? DType::IQ4_NL
                                                                        : *dtype_from_name(ts);
    for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.1.ffn_up.weight"})
      EXPECT_EQ(f.tensor(name).type, want) << name;

    // Same seed: the f32 model holds the exact values every other type quantized.
    for (const auto& t : f.tensors()) {
      const std::vector<float> got = dequant(t), orig = dequant(ref.file->tensor(t.name));
      ASSERT_EQ(got.size(), orig.size());
      double err = 0, norm = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        err += (got[i] - orig[i]) * double(got[i] - orig[i]);
        norm += orig[i] * double(orig[i]);
      }
      ASSERT_GT(norm, 0) << t.name;
      EXPECT_LE(std::sqrt(err / norm), max_rel_rms(t.type)) << t.name << " " << dtype_name(t.type);
    }
  }
}

TEST(GenModel, WeightStatistics) {
  GenModelOptions o;
  o.type = "f32";
  const Parsed p = make(o);
  auto stats = [&](const std::string& name) {
    const std::vector<float> v = dequant(p.file->tensor(name));
    double sum = 0, sq = 0;
    for (float x : v) sum += x;
    const double mean = sum / v.size();
    for (float x : v) sq += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(sq / v.size())};
  };
  // Matrices: mean 0, sd 1/sqrt(row length) (64 -> 0.125, 160 -> 0.079).
  auto [m_q, sd_q] = stats("blk.0.attn_q.weight");
  EXPECT_NEAR(m_q, 0.0, 0.01);
  EXPECT_NEAR(sd_q, 0.125, 0.01);
  auto [m_d, sd_d] = stats("blk.1.ffn_down.weight");
  EXPECT_NEAR(m_d, 0.0, 0.01);
  EXPECT_NEAR(sd_d, 1 / std::sqrt(160.0), 0.01);
  // Norms near 1 but not all 1.
  auto [m_n, sd_n] = stats("blk.1.ffn_norm.weight");
  EXPECT_NEAR(m_n, 1.0, 0.05);
  EXPECT_GT(sd_n, 0.03);
  EXPECT_LT(sd_n, 0.2);
  // Distinct tensors get distinct streams.
  EXPECT_NE(dequant(p.file->tensor("blk.0.attn_q.weight")), dequant(p.file->tensor("blk.0.attn_output.weight")));
}

TEST(GenModel, DeterministicAcrossRunsAndThreads) {
  GenModelOptions o;
  o.type = "q4_0";
  o.n_threads = 1;
  const std::vector<uint8_t> a = generate_model_bytes(o);
  const std::vector<uint8_t> b = generate_model_bytes(o);
  o.n_threads = 3;
  const std::vector<uint8_t> c = generate_model_bytes(o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  o.seed = 43;
  EXPECT_NE(a, generate_model_bytes(o));

  // The file path writes the same bytes.
  o.seed = 42;
  o.path = ::testing::TempDir() + "/weft_gen_model_test.gguf";
  generate_model(o);
  std::ifstream in(o.path, std::ios::binary);
  const std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(a, d);
  std::remove(o.path.c_str());
}

// llama.cpp's use_more_bits for 8 layers: first/last eighth (0, 7) and every third from 1 (3, 6).
constexpr bool kMoreBits8[] = {true, false, false, true, false, false, true, true};

TEST(GenModel, KQuantMixes) {
  const std::pair<const char*, bool> cases[] = {{"q4_k_m", false}, {"q4_k_m", true}, {"q5_k_m", false}};
  for (auto [type, tied] : cases) {
    {
      SCOPED_TRACE(std::string(type) + (tied ? " tied" : ""));
      GenModelOptions o;
      o.type = type;
      o.tied = tied;
      o.overrides = {256, 8, 256, 4, 2, 300, 0};  // rows fill whole super-blocks
      const Parsed p = make(o);
      const gguf::File& f = *p.file;
      expect_tensor_set(f, "llama", gen_model_shape(o), tied);
      const DType bulk = std::string(type) == "q4_k_m" ? DType::Q4_K : DType::Q5_K;
      for (int l = 0; l < 8; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const DType more = kMoreBits8[l] ? DType::Q6_K : bulk;
        EXPECT_EQ(f.tensor(b + "attn_v.weight").type, more) << l;
        EXPECT_EQ(f.tensor(b + "ffn_down.weight").type, more) << l;
        for (const char* n :
             {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"})
          EXPECT_EQ(f.tensor(b + n).type, bulk) << b << n;
      }
      if (tied) {
        EXPECT_EQ(f.tensor("token_embd.weight").type, DType::Q6_K);
      } else {
        EXPECT_EQ(f.tensor("output.weight").type, DType::Q6_K);
        EXPECT_EQ(f.tensor("token_embd.weight").type, bulk);
      }
    }
  }
  // Pure K type with full rows stays that type, and f16 is the last resort for odd rows.
  EXPECT_EQ(gen_tensor_type("q4_k", "attn_q.weight", 0, 2, 256, false), DType::Q4_K);
  EXPECT_EQ(gen_tensor_type("q6_k", "attn_q.weight", 0, 2, 96, false), DType::Q8_0);
  EXPECT_EQ(gen_tensor_type("q4_0", "attn_q.weight", 0, 2, 48, false), DType::F16);
}

TEST(GenModel, Qwen2AndQwen3) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    SCOPED_TRACE(arch);
    GenModelOptions o;
    o.arch = arch;
    o.type = "q8_0";
    o.n_ctx = 1024;
    const Parsed p = make(o);
    const gguf::File& f = *p.file;
    const std::string a = arch;
    EXPECT_EQ(f.get_string("general.architecture"), a);
    EXPECT_EQ(f.get_int(a + ".block_count"), 2);
    EXPECT_EQ(f.get_int(a + ".context_length"), 1024);
    EXPECT_NEAR(*f.get_float_opt(a + ".rope.freq_base"), 1e6, 1);
    EXPECT_FALSE(f.find("llama.block_count"));
    expect_tensor_set(f, a, gen_model_preset("tiny"), false);
    if (a == "qwen3") {
      EXPECT_EQ(f.get_int("qwen3.attention.key_length"), 16);
    }
  }
}

// --type mxfp4 as llama-quantize's MXFP4_MOE: the expert stacks MXFP4, every other matrix Q8_0 (the
// router and biases f32), file type 38; the experts hold the f32 model's values within MXFP4's error.
TEST(GenModel, Mxfp4QuantizesTheExperts) {
  GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = "gpt-oss";
  o.type = "mxfp4";
  const Parsed p = make(o);
  o.type = "f32";
  const Parsed ref = make(o);
  const gguf::File& f = *p.file;
  EXPECT_EQ(f.get_int("general.file_type"), 38);
  for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.1.attn_output.weight"})
    EXPECT_EQ(f.tensor(name).type, DType::Q8_0) << name;
  EXPECT_EQ(f.tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
  int experts = 0;
  for (const auto& t : f.tensors()) {
    if (t.name.find("_exps.weight") == std::string::npos) continue;
    ++experts;
    EXPECT_EQ(t.type, DType::MXFP4) << t.name;
    const std::vector<float> got = dequant(t), orig = dequant(ref.file->tensor(t.name));
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (got[i] - orig[i]) * double(got[i] - orig[i]);
      norm += orig[i] * double(orig[i]);
    }
    EXPECT_LE(std::sqrt(err / norm), max_rel_rms(DType::MXFP4)) << t.name;
  }
  EXPECT_EQ(experts, 6) << "gate, up and down of 2 layers";
  EXPECT_EQ(gen_tensor_type("mxfp4", "ffn_down_exps.weight", 0, 2, 64, false), DType::MXFP4);
  EXPECT_EQ(gen_tensor_type("mxfp4", "ffn_down.weight", 0, 2, 64, false), DType::Q8_0);
}

// The MoE layouts as llama.cpp's loaders expect them (llama-model.cpp: qwen2moe, qwen3moe, llama
// with experts): keys, stacked [cols, rows, n_expert] expert tensors, an f32 router.
TEST(GenModel, MixtureOfExpertsLayouts) {
  for (const char* arch : {"qwen3moe", "qwen2moe", "llama"}) {
    SCOPED_TRACE(arch);
    GenModelOptions o;
    o.preset = "tiny-moe";
    o.arch = arch;
    o.type = "q4_0";
    const Parsed p = make(o);
    const gguf::File& f = *p.file;
    const std::string a = arch;
    EXPECT_EQ(f.get_int(a + ".expert_count"), 8);
    EXPECT_EQ(f.get_int(a + ".expert_used_count"), 2);
    const bool mixtral = a == "llama", shared = a == "qwen2moe";
    EXPECT_EQ(f.get_int(a + ".feed_forward_length"), mixtral ? 96 : 192);
    EXPECT_EQ(f.get_int_opt(a + ".expert_feed_forward_length"), mixtral ? std::nullopt : std::optional<int64_t>(96));
    EXPECT_EQ(f.get_int_opt(a + ".expert_shared_feed_forward_length"),
              shared ? std::optional<int64_t>(128) : std::nullopt);
    for (int l = 0; l < 2; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(f.find_tensor(b + "ffn_gate.weight"), nullptr) << "no dense FFN";
      EXPECT_EQ(f.tensor(b + "ffn_gate_inp.weight").shape, (std::vector<int64_t>{64, 8}));
      EXPECT_EQ(f.tensor(b + "ffn_gate_inp.weight").type, DType::F32) << "llama-quantize keeps the router f32";
      EXPECT_EQ(f.tensor(b + "ffn_gate_exps.weight").shape, (std::vector<int64_t>{64, 96, 8}));
      EXPECT_EQ(f.tensor(b + "ffn_up_exps.weight").shape, (std::vector<int64_t>{64, 96, 8}));
      EXPECT_EQ(f.tensor(b + "ffn_down_exps.weight").shape, (std::vector<int64_t>{96, 64, 8}));
      EXPECT_EQ(f.tensor(b + "ffn_down_exps.weight").type, DType::Q4_0);
      EXPECT_EQ(f.find_tensor(b + "ffn_gate_inp_shexp.weight") != nullptr, shared);
      if (shared) {
        EXPECT_EQ(f.tensor(b + "ffn_gate_inp_shexp.weight").shape, (std::vector<int64_t>{64}));
        EXPECT_EQ(f.tensor(b + "ffn_down_shexp.weight").shape, (std::vector<int64_t>{128, 64}));
      }
    }
  }
  GenModelOptions o;
  o.preset = "moe-2b";
  const GenModelShape s = gen_model_shape(o);  // shape only: generating 2B parameters is for the CLI
  EXPECT_EQ(s.n_expert, 32);
  EXPECT_EQ(s.n_expert_used, 8);
  EXPECT_EQ(s.n_embd, 2048);
  o.arch = "qwen3";
  EXPECT_ERROR(gen_model_shape(o), "arch qwen3 has no experts");
  o.preset = "tiny";
  o.arch = "qwen3moe";
  EXPECT_ERROR(gen_model_shape(o), "arch qwen3moe is a mixture of experts: use an MoE preset");
  o.preset = "tiny-moe";
  o.overrides.n_expert_used = 9;
  EXPECT_ERROR(gen_model_shape(o), "experts: 9 used of 8");
}

using TensorShapes = std::map<std::string, std::vector<int64_t>>;

// The tensors outside the layers (untied).
void add_outer_tensors(TensorShapes& m, const GenModelShape& s) {
  m["token_embd.weight"] = {s.n_embd, s.n_vocab};
  m["output_norm.weight"] = {s.n_embd};
  m["output.weight"] = {s.n_embd, s.n_vocab};
}

// Layer b's dense SwiGLU FFN.
void add_dense_ffn(TensorShapes& m, const std::string& b, const GenModelShape& s) {
  m[b + "ffn_gate.weight"] = {s.n_embd, s.n_ff};
  m[b + "ffn_up.weight"] = {s.n_embd, s.n_ff};
  m[b + "ffn_down.weight"] = {s.n_ff, s.n_embd};
}

// Layer b's router, expert stacks ([cols, rows, n_expert]) and a shared expert shexp wide.
void add_experts(TensorShapes& m, const std::string& b, const GenModelShape& s, int64_t shexp) {
  m[b + "ffn_gate_inp.weight"] = {s.n_embd, s.n_expert};
  m[b + "ffn_gate_exps.weight"] = {s.n_embd, s.n_ff_exp, s.n_expert};
  m[b + "ffn_up_exps.weight"] = {s.n_embd, s.n_ff_exp, s.n_expert};
  m[b + "ffn_down_exps.weight"] = {s.n_ff_exp, s.n_embd, s.n_expert};
  m[b + "ffn_gate_shexp.weight"] = {s.n_embd, shexp};
  m[b + "ffn_up_shexp.weight"] = {s.n_embd, shexp};
  m[b + "ffn_down_shexp.weight"] = {shexp, s.n_embd};
}

// Exactly the tensors of `want`, matrices in the file's type; vectors, the router and ssm_conv1d
// f32 (llama-quantize leaves them).
void expect_tensors(const gguf::File& f, const TensorShapes& want, DType matrix_type) {
  EXPECT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, shape] : want) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    const bool f32 = shape.size() == 1 || name.find("ffn_gate_inp.") != std::string::npos ||
                     name.find("ssm_conv1d.") != std::string::npos;
    EXPECT_EQ(t->type, f32 ? DType::F32 : matrix_type) << name;
  }
}

// DeepSeek V3 (deepseek2) as llama.cpp's loader wants it, written out from its load_tensors: the
// latent attention with attn_k_b / attn_v_b split, one leading dense layer, then the router, its
// selection bias, the expert stacks and a shared expert n_ff_exp * expert_shared_count wide.
TensorShapes expected_deepseek2(const GenModelShape& s) {
  const int64_t q_head = s.qk_nope + s.qk_rope;
  TensorShapes m;
  add_outer_tensors(m, s);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    m[b + "attn_norm.weight"] = {s.n_embd};
    if (s.q_lora_rank > 0) {
      m[b + "attn_q_a.weight"] = {s.n_embd, s.q_lora_rank};
      m[b + "attn_q_a_norm.weight"] = {s.q_lora_rank};
      m[b + "attn_q_b.weight"] = {s.q_lora_rank, s.n_head * q_head};
    } else {
      m[b + "attn_q.weight"] = {s.n_embd, s.n_head * q_head};
    }
    m[b + "attn_kv_a_mqa.weight"] = {s.n_embd, s.kv_lora_rank + s.qk_rope};
    m[b + "attn_kv_a_norm.weight"] = {s.kv_lora_rank};
    m[b + "attn_k_b.weight"] = {s.qk_nope, s.kv_lora_rank, s.n_head};
    m[b + "attn_v_b.weight"] = {s.kv_lora_rank, s.v_head, s.n_head};
    m[b + "attn_output.weight"] = {s.n_head * s.v_head, s.n_embd};
    m[b + "ffn_norm.weight"] = {s.n_embd};
    if (l < s.n_dense_lead) {
      add_dense_ffn(m, b, s);
      continue;
    }
    m[b + "exp_probs_b.bias"] = {s.n_expert};
    add_experts(m, b, s, s.n_ff_exp * s.n_expert_shared);
  }
  return m;
}

void expect_deepseek2_tensors(const gguf::File& f, const GenModelShape& s, DType matrix_type) {
  expect_tensors(f, expected_deepseek2(s), matrix_type);
}

// The keys llama.cpp's deepseek2 loader reads (llama-model.cpp, models/deepseek2.cpp), with the
// values DeepSeek V3's converter writes: attention as the absorbed form sees it (one KV head: the
// latent and the roped key as K, the latent as V), the heads' own sizes as the *_mla lengths,
// sigmoid scores normalised and scaled by 2.5, expert groups.
TEST(GenModel, DeepSeek2Layout) {
  GenModelOptions o;
  o.preset = "tiny-moe";
  o.arch = "deepseek2";
  o.type = "q8_0";
  const GenModelShape s = gen_model_shape(o);
  EXPECT_EQ(s.n_layer, 3);
  EXPECT_EQ(s.head_dim, 48);
  EXPECT_EQ(s.n_ff_shexp, 96);
  const Parsed p = make(o);
  const gguf::File& f = *p.file;
  const std::map<std::string, int64_t> ints = {
      {"deepseek2.context_length", 512},
      {"deepseek2.embedding_length", 64},
      {"deepseek2.block_count", 3},
      {"deepseek2.feed_forward_length", 192},
      {"deepseek2.vocab_size", 320},
      {"deepseek2.leading_dense_block_count", 1},
      {"deepseek2.expert_count", 8},
      {"deepseek2.expert_used_count", 2},
      {"deepseek2.expert_feed_forward_length", 96},
      {"deepseek2.expert_shared_count", 1},
      {"deepseek2.expert_gating_func", 2},
      {"deepseek2.expert_group_count", 4},
      {"deepseek2.expert_group_used_count", 2},
      {"deepseek2.attention.head_count", 4},
      {"deepseek2.attention.head_count_kv", 1},
      {"deepseek2.attention.q_lora_rank", 32},
      {"deepseek2.attention.kv_lora_rank", 64},
      {"deepseek2.attention.key_length", 64 + 16},
      {"deepseek2.attention.value_length", 64},
      {"deepseek2.attention.key_length_mla", 32 + 16},
      {"deepseek2.attention.value_length_mla", 32},
      {"deepseek2.rope.dimension_count", 16},
  };
  EXPECT_EQ(f.get_string("general.architecture"), "deepseek2");
  for (const auto& [key, value] : ints) EXPECT_EQ(f.get_int_opt(key), value) << key;
  EXPECT_NEAR(*f.get_float_opt("deepseek2.expert_weights_scale"), 2.5, 1e-6);
  EXPECT_EQ(f.get_bool_opt("deepseek2.expert_weights_norm"), true);
  EXPECT_NEAR(*f.get_float_opt("deepseek2.rope.freq_base"), 10000.0, 1e-3);
  EXPECT_NEAR(*f.get_float_opt("deepseek2.attention.layer_norm_rms_epsilon"), 1e-6, 1e-10);
  for (const char* absent : {"deepseek2.expert_shared_feed_forward_length", "deepseek2.rope.scaling.type",
                             "deepseek2.rope.scaling.factor", "deepseek2.rope.scaling.yarn_log_multiplier"})
    EXPECT_FALSE(f.find(absent)) << absent << ": no rope scaling, no qwen2moe key";
  expect_deepseek2_tensors(f, s, DType::Q8_0);

  // The selection bias: small (Init::Bias, sd 0.1) and different per expert and layer.
  const std::vector<float> b1 = dequant(f.tensor("blk.1.exp_probs_b.bias"));
  const std::vector<float> b2 = dequant(f.tensor("blk.2.exp_probs_b.bias"));
  EXPECT_NE(b1, b2);
  double sq = 0;
  for (float x : b1) {
    EXPECT_LT(std::abs(x), 0.4f);
    sq += x * double(x);
  }
  EXPECT_GT(sq, 0);

  // V2-Lite's layout: q straight from the embedding; q_lora_rank 0 still written (llama.cpp
  // requires the key unless the layer count is V2-Lite's 26 or 27).
  o.overrides.q_lora_rank = -1;
  const Parsed lite = make(o);
  EXPECT_EQ(lite.file->get_int_opt("deepseek2.attention.q_lora_rank"), 0);
  GenModelShape ls = s;
  ls.q_lora_rank = 0;
  expect_deepseek2_tensors(*lite.file, ls, DType::Q8_0);
  EXPECT_EQ(gen_model_shape(o).q_lora_rank, 0);

  // YaRN as V3's files have it: the log multiplier 0.1 * mscale_all_dim (1).
  o = {};
  o.preset = "tiny-moe";
  o.arch = "deepseek2";
  o.rope_scaling = "yarn";
  const Parsed yarn = make(o);
  EXPECT_EQ(yarn.file->get_string("deepseek2.rope.scaling.type"), "yarn");
  EXPECT_NEAR(*yarn.file->get_float_opt("deepseek2.rope.scaling.yarn_log_multiplier"), 0.1, 1e-7);
  EXPECT_NEAR(*yarn.file->get_float_opt("deepseek2.rope.scaling.factor"), 4.0, 1e-6);
}

// deepseek-mini's shape, and the K-quant mix on it (cut to 256 wide and 2 layers so that a test can
// write it): rows of 256 and more stay Q4_K, ffn_down of every kind takes Q6_K in use_more_bits'
// layers, attn_k_b's 64-wide rows fall back to Q5_0 as llama-quantize's do on V3's 128-wide ones.
TEST(GenModel, DeepSeekMiniAndItsKQuants) {
  GenModelOptions o;
  o.preset = "deepseek-mini";
  o.arch = "deepseek2";
  const GenModelShape s = gen_model_shape(o);
  EXPECT_EQ(s.n_embd, 1024);
  EXPECT_EQ(s.n_layer, 8);
  EXPECT_EQ(s.n_expert, 32);
  EXPECT_EQ(s.q_lora_rank, 512);
  EXPECT_EQ(s.kv_lora_rank, 256);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.n_vocab, 32000);
  for (const auto& [name, shape] : expected_deepseek2(s)) {
    if (shape.size() == 1 || name.find("ffn_gate_inp") != std::string::npos) continue;
    EXPECT_TRUE(shape[0] % 256 == 0 || name.find("attn_k_b") != std::string::npos) << name << " " << shape[0];
  }

  o.type = "q4_k_m";
  o.overrides.n_embd = 256;
  o.overrides.n_layer = 2;
  o.overrides.n_ff = 256;
  o.overrides.n_vocab = 300;
  o.overrides.n_expert = 8;
  const Parsed p = make(o);
  const gguf::File& f = *p.file;
  const GenModelShape small = gen_model_shape(o);
  const auto want = expected_deepseek2(small);
  EXPECT_EQ(f.tensors().size(), want.size());
  for (const auto& [name, shape] : want) EXPECT_EQ(f.tensor(name).shape, shape) << name;
  // use_more_bits(l, 2): layer 1 only.
  EXPECT_EQ(f.tensor("output.weight").type, DType::Q6_K);
  EXPECT_EQ(f.tensor("token_embd.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.1.ffn_down_exps.weight").type, DType::Q6_K);
  EXPECT_EQ(f.tensor("blk.1.ffn_down_shexp.weight").type, DType::Q6_K);
  for (const char* n :
       {"attn_q_a.weight", "attn_q_b.weight", "attn_kv_a_mqa.weight", "attn_v_b.weight", "attn_output.weight"})
    EXPECT_EQ(f.tensor(std::string("blk.1.") + n).type, DType::Q4_K) << n;
  EXPECT_EQ(f.tensor("blk.1.attn_k_b.weight").type, DType::Q5_0);
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").type, DType::Q4_K);
  EXPECT_EQ(f.tensor("blk.1.ffn_gate_inp.weight").type, DType::F32);
}

TEST(GenModel, DeepSeek2BadShapesThrow) {
  GenModelOptions o;
  o.arch = "deepseek2";
  EXPECT_ERROR(gen_model_shape(o), "arch deepseek2 needs a latent-attention shape");
  o.preset = "tiny-moe";
  o.overrides.n_head_kv = 2;
  EXPECT_ERROR(gen_model_shape(o), "one latent KV head");
  o.overrides = {};
  o.overrides.n_expert_groups = 3;
  EXPECT_ERROR(gen_model_shape(o), "expert groups: 2 used of 3 over 8 experts");
  o.overrides = {};
  o.overrides.n_group_used = 4;
  EXPECT_ERROR(gen_model_shape(o), "expert groups: 4 used of 4");
  o.overrides = {};
  o.overrides.qk_rope = 15;
  EXPECT_ERROR(gen_model_shape(o), "qk_rope 15 positive and even");
  o.overrides = {};
  o.overrides.n_dense_lead = 4;
  EXPECT_ERROR(gen_model_shape(o), "4 leading dense layers of 3");
  o = {};
  o.preset = "deepseek-mini";
  o.arch = "qwen3moe";
  EXPECT_ERROR(gen_model_shape(o), "are DeepSeek's (--arch deepseek2)");
  // The other architectures keep tiny-moe's own shape.
  o.preset = "tiny-moe";
  EXPECT_EQ(gen_model_shape(o).n_layer, 2);
  EXPECT_EQ(gen_model_shape(o).n_head_kv, 2);
}

// Qwen 3.5 (qwen35, qwen35moe) as llama.cpp's loaders want it, written out from models/qwen35.cpp
// and qwen35moe.cpp (load_arch_tensors): layer l is Gated DeltaNet unless (l + 1) % interval == 0;
// those layers' fused [q; k; v], output gate, conv, decay and norm; the full-attention layers' q
// twice as wide (each head's q, then its gate) with per-head q/k norms; post_attention_norm before
// the FFN; the MoE's router, expert stacks and sigmoid-gated shared expert.
TensorShapes expected_qwen35(const GenModelShape& s, int64_t interval) {
  const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  const int64_t key_dim = s.lin_k_heads * s.lin_head_dim, value_dim = s.lin_v_heads * s.lin_head_dim;
  TensorShapes m;
  add_outer_tensors(m, s);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    m[b + "attn_norm.weight"] = {s.n_embd};
    m[b + "post_attention_norm.weight"] = {s.n_embd};
    if ((l + 1) % interval != 0) {
      m[b + "attn_qkv.weight"] = {s.n_embd, 2 * key_dim + value_dim};
      m[b + "attn_gate.weight"] = {s.n_embd, value_dim};
      m[b + "ssm_conv1d.weight"] = {4, 2 * key_dim + value_dim};
      m[b + "ssm_dt.bias"] = {s.lin_v_heads};
      m[b + "ssm_a"] = {s.lin_v_heads};
      m[b + "ssm_beta.weight"] = {s.n_embd, s.lin_v_heads};
      m[b + "ssm_alpha.weight"] = {s.n_embd, s.lin_v_heads};
      m[b + "ssm_norm.weight"] = {s.lin_head_dim};
      m[b + "ssm_out.weight"] = {value_dim, s.n_embd};
    } else {
      m[b + "attn_q.weight"] = {s.n_embd, 2 * q};
      m[b + "attn_k.weight"] = {s.n_embd, kv};
      m[b + "attn_v.weight"] = {s.n_embd, kv};
      m[b + "attn_output.weight"] = {q, s.n_embd};
      m[b + "attn_q_norm.weight"] = {s.head_dim};
      m[b + "attn_k_norm.weight"] = {s.head_dim};
    }
    if (s.n_expert == 0) {
      add_dense_ffn(m, b, s);
      continue;
    }
    m[b + "ffn_gate_inp_shexp.weight"] = {s.n_embd};  // its gate: one sigmoid per token
    add_experts(m, b, s, s.n_ff_shexp);
  }
  return m;
}

// The keys llama.cpp's qwen35 / qwen35moe loaders read, with the values of the tiny shapes: heads of
// 32 (not 64 / 4) roped on their first 8 features in IMRoPE sections [2, 1, 1, 0]; linear layers of 2
// key and 4 value heads of 16 (state_size: the head, group_count: key heads, time_step_rank: value
// heads, inner_size: 4 x 16), a conv of 4 taps; layers 0..2 linear, 3 full attention.
TEST(GenModel, Qwen35Layout) {
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    SCOPED_TRACE(arch);
    const std::string a = arch;
    const bool moe = a == "qwen35moe";
    GenModelOptions o;
    o.arch = arch;
    o.preset = moe ? "tiny-moe" : "tiny";
    o.type = "q8_0";
    const GenModelShape s = gen_model_shape(o);
    EXPECT_EQ(s.head_dim, 32);
    EXPECT_EQ(s.n_rot, 8);
    const Parsed p = make(o);
    const gguf::File& f = *p.file;
    EXPECT_EQ(f.get_string("general.architecture"), a);
    std::map<std::string, int64_t> ints = {
        {".context_length", 512},        {".embedding_length", 64},     {".block_count", 4},
        {".feed_forward_length", 160},   {".vocab_size", 320},          {".attention.head_count", 4},
        {".attention.head_count_kv", 2}, {".attention.key_length", 32}, {".attention.value_length", 32},
        {".rope.dimension_count", 8},    {".ssm.conv_kernel", 4},       {".ssm.state_size", 16},
        {".ssm.group_count", 2},         {".ssm.time_step_rank", 4},    {".ssm.inner_size", 64},
        {".full_attention_interval", 4},
    };
    if (moe) {
      ints[".expert_count"] = 8;
      ints[".expert_used_count"] = 2;
      ints[".expert_feed_forward_length"] = 96;
      ints[".expert_shared_feed_forward_length"] = 128;
    }
    for (const auto& [key, value] : ints) EXPECT_EQ(f.get_int_opt(a + key), value) << key;
    EXPECT_EQ(f.get_int_array(a + ".rope.dimension_sections"), (std::vector<int64_t>{2, 1, 1, 0}));
    EXPECT_EQ(f.find(a + ".rope.dimension_sections")->elem_type, gguf::ValueType::I32);
    EXPECT_NEAR(*f.get_float_opt(a + ".rope.freq_base"), 1e7, 1);
    EXPECT_NEAR(*f.get_float_opt(a + ".attention.layer_norm_rms_epsilon"), 1e-6, 1e-10);
    for (const char* absent : {".expert_gating_func", ".expert_weights_scale", ".nextn_predict_layers",
                               ".rope.scaling.type", ".attention.sliding_window"})
      EXPECT_FALSE(f.find(a + absent)) << absent;
    EXPECT_EQ(f.tensor("blk.0.attn_qkv.weight").shape, (std::vector<int64_t>{64, 128}));  // 2 x 2 x 16 + 4 x 16
    EXPECT_EQ(f.tensor("blk.3.attn_q.weight").shape, (std::vector<int64_t>{64, 256}));    // 4 heads x (32 + 32)
    EXPECT_EQ(f.tensor("blk.3.attn_output.weight").shape, (std::vector<int64_t>{128, 64}));
    EXPECT_EQ(f.find_tensor("blk.3.attn_qkv.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.2.attn_q.weight"), nullptr);
    expect_tensors(f, expected_qwen35(s, 4), DType::Q8_0);

    // The decay rates: ssm_a = -exp(A_log), A_log uniform in [-1, 1); the time-step bias in [-4, 0);
    // different per layer.
    for (int l = 0; l < 3; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      for (float x : dequant(f.tensor(b + "ssm_a"))) {
        EXPECT_LE(x, -std::exp(-1.0f));
        EXPECT_GE(x, -std::exp(1.0f));
      }
      for (float x : dequant(f.tensor(b + "ssm_dt.bias"))) {
        EXPECT_LE(x, 0.0f);
        EXPECT_GE(x, -4.0f);
      }
    }
    EXPECT_NE(dequant(f.tensor("blk.0.ssm_a")), dequant(f.tensor("blk.1.ssm_a")));
  }

  // Other widths: the interval, the heads and n_rot follow the overrides (n_rot a quarter of the
  // head unless given); every layer but each 2nd is linear.
  GenModelOptions o{
      .type = "f16",
      .arch = "qwen35",
      .overrides = {.head_dim = 64, .full_attn_interval = 2, .lin_k_heads = 1, .lin_v_heads = 3, .lin_head_dim = 32}};
  const GenModelShape s = gen_model_shape(o);
  EXPECT_EQ(s.n_rot, 16);
  const Parsed p = make(o);
  EXPECT_EQ(p.file->get_int_opt("qwen35.rope.dimension_count"), 16);
  EXPECT_EQ(p.file->get_int_array("qwen35.rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
  EXPECT_EQ(p.file->get_int_opt("qwen35.ssm.inner_size"), 96);
  expect_tensors(*p.file, expected_qwen35(s, 2), DType::F16);
  o.overrides.n_rot = 64;
  EXPECT_EQ(make(o).file->get_int_array("qwen35.rope.dimension_sections"), (std::vector<int64_t>{11, 11, 10, 0}));
}

// Qwen3-Next as llama.cpp's qwen3next loader wants it (models/qwen3next.cpp, load_arch_tensors):
// qwen35moe's tensors but for the linear layers' beta and alpha, one ssm_ba [n_embd, 2 x value
// heads]; its older files' ssm_in [n_embd, 2 x key_dim + 2 x value_dim] in place of attn_qkv and
// attn_gate. Its keys are qwen35moe's without IMRoPE's sections (plain NeoX rotation).
TEST(GenModel, Qwen3NextLayouts) {
  for (const bool fused_qkvz : {false, true}) {
    SCOPED_TRACE(fused_qkvz ? "ssm_in" : "attn_qkv");
    GenModelOptions o{.preset = "tiny-moe", .type = "q8_0", .arch = "qwen3next"};
    o.fused_qkvz = fused_qkvz;
    const GenModelShape s = gen_model_shape(o);
    EXPECT_EQ(std::tie(s.lin_k_heads, s.lin_v_heads, s.lin_head_dim, s.n_rot, s.n_expert),
              std::make_tuple(2, 4, 16, 8, 8));
    const Parsed p = make(o);
    const gguf::File& f = *p.file;
    EXPECT_EQ(f.get_string("general.architecture"), "qwen3next");
    for (const char* key :
         {".ssm.conv_kernel", ".ssm.state_size", ".ssm.group_count", ".ssm.time_step_rank", ".ssm.inner_size",
          ".full_attention_interval", ".expert_shared_feed_forward_length", ".rope.dimension_count"})
      EXPECT_TRUE(f.find(std::string("qwen3next") + key)) << key;
    EXPECT_FALSE(f.find("qwen3next.rope.dimension_sections"));
    TensorShapes want = expected_qwen35(s, 4);
    const int64_t key_dim = 2 * 16, value_dim = 4 * 16;
    for (int l = 0; l < 3; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      want.erase(b + "ssm_beta.weight");
      want.erase(b + "ssm_alpha.weight");
      want[b + "ssm_ba.weight"] = {s.n_embd, 2 * s.lin_v_heads};
      if (fused_qkvz) {
        want.erase(b + "attn_qkv.weight");
        want.erase(b + "attn_gate.weight");
        want[b + "ssm_in.weight"] = {s.n_embd, 2 * key_dim + 2 * value_dim};
      }
    }
    expect_tensors(f, want, DType::Q8_0);
  }
  GenModelOptions o{.preset = "qwen3next-mini", .arch = "qwen3next"};
  const GenModelShape mini = gen_model_shape(o);
  EXPECT_EQ(std::tie(mini.n_embd, mini.lin_k_heads, mini.lin_v_heads, mini.n_expert), std::make_tuple(1024, 8, 16, 32));
  EXPECT_ERROR(gen_model_shape(o = {.preset = "qwen35-mini", .arch = "qwen3next"}), "is a mixture of experts");
  o = {.preset = "tiny-moe", .arch = "qwen35moe"};
  o.fused_qkvz = true;
  EXPECT_ERROR(gen_model_shape(o), "--fused-qkvz (ssm_in) is Qwen3-Next's older layout");
}

// The benchmark shapes (shapes only), and the mistakes gen-model refuses.
TEST(GenModel, Qwen35PresetsAndBadShapes) {
  GenModelOptions o{.preset = "qwen35-mini", .arch = "qwen35"};
  GenModelShape s = gen_model_shape(o);
  // n_embd, n_layer, heads, head size and n_rot; the linear layers' key / value heads and head size
  EXPECT_EQ(std::tie(s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.head_dim, s.n_rot, s.n_vocab),
            std::make_tuple(1024, 8, 8, 2, 256, 64, 32000));
  EXPECT_EQ(std::tie(s.lin_k_heads, s.lin_v_heads, s.lin_head_dim, s.full_attn_interval),
            std::make_tuple(8, 16, 128, 4));
  for (const auto& [name, shape] : expected_qwen35(s, 4)) {
    if (shape.size() > 1 && name.find("ssm_conv1d") == std::string::npos) {  // f32: 4 taps per channel
      EXPECT_EQ(shape[0] % 256, 0) << name << ": K-quant rows";
    }
  }
  s = gen_model_shape(o = {.preset = "qwen35moe-mini", .arch = "qwen35moe"});
  EXPECT_EQ(std::tie(s.n_expert, s.n_expert_used, s.n_ff_exp, s.n_ff_shexp), std::make_tuple(32, 4, 512, 512));
  EXPECT_EQ(s.lin_v_heads, 16);

  EXPECT_ERROR(gen_model_shape(o = {.preset = "qwen35-mini"}), "Gated DeltaNet layers are Qwen 3.5's");
  EXPECT_ERROR(gen_model_shape(o = {.preset = "qwen35-mini", .arch = "qwen35moe"}), "is a mixture of experts");
  EXPECT_ERROR(gen_model_shape(o = {.preset = "qwen35moe-mini", .arch = "qwen35"}), "arch qwen35 has no experts");
  EXPECT_ERROR(gen_model_shape(o = {.preset = "500m", .arch = "qwen35"}), "needs a Gated DeltaNet shape");
  o = {.arch = "qwen35"};
  o.overrides.lin_v_heads = 3;
  EXPECT_ERROR(gen_model_shape(o), "3 linear value heads are not a multiple of its 2 key heads");
  o.overrides = {};
  o.overrides.n_rot = 6;
  o.overrides.head_dim = 4;
  EXPECT_ERROR(gen_model_shape(o), "n_rot 6 must be even and within the head (4)");
  o = {.arch = "qwen3"};
  o.overrides.n_rot = 8;
  EXPECT_ERROR(gen_model_shape(o), "a partial rotary embedding (n_rot 8 of 16) is Qwen 3.5's");
  // The other architectures keep tiny's and tiny-moe's own shapes.
  EXPECT_EQ(gen_model_shape(o = {.arch = "qwen3"}).n_layer, 2);
  EXPECT_EQ(gen_model_shape(o = {.preset = "tiny-moe", .arch = "qwen3moe"}).head_dim, 16);
}

TEST(GenModel, SpmVocab) {
  for (int64_t n : {259, 320, 32000, 128256}) {
    SCOPED_TRACE(n);
    const GenVocab v = gen_vocab(n);
    ASSERT_EQ(v.tokens.size(), static_cast<size_t>(n));
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    ASSERT_EQ(v.types.size(), v.tokens.size());
    EXPECT_EQ(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size(), v.tokens.size());
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.types[0], 2);
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.types[1], 3);
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.tokens[3], "<0x00>");
    EXPECT_EQ(v.tokens[3 + 0x0A], "<0x0A>");
    EXPECT_EQ(v.tokens[258], "<0xFF>");
    for (int i = 3; i < 259; ++i) EXPECT_EQ(v.types[i], 6);
    for (int64_t i = 259; i < n; ++i) {
      ASSERT_EQ(v.types[i], 1);
      ASSERT_FALSE(v.tokens[i].empty());
      if (i > 259) {
        ASSERT_LT(v.scores[i], v.scores[i - 1]);
      }
    }
  }
  const GenVocab v = gen_vocab(320);
  EXPECT_EQ(v.tokens[259], "\xE2\x96\x81");  // the bare word-start piece comes first

  GenModelOptions o;
  const Parsed p = make(o);
  EXPECT_EQ(p.file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(p.file->get_string_array("tokenizer.ggml.tokens"), v.tokens);
  EXPECT_EQ(p.file->get_float_array("tokenizer.ggml.scores"), v.scores);
  EXPECT_EQ(p.file->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(p.file->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(p.file->get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(p.file->get_bool_opt("tokenizer.ggml.add_bos_token"), true);
}

TEST(GenModel, ChatTemplateAndItsControlTokens) {
  GenModelOptions o;
  const Parsed plain = make(o);
  EXPECT_FALSE(plain.file->find("tokenizer.chat_template"));

  o.chat_template = "chatml";
  o.control_tokens = {"<|im_start|>", "<|im_end|>", "</s>", "<|im_start|>"};  // known and repeated ones once
  const Parsed p = make(o);
  EXPECT_EQ(p.file->get_string("tokenizer.chat_template"), "chatml");
  const auto tokens = p.file->get_string_array("tokenizer.ggml.tokens");
  const auto types = p.file->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(tokens.size(), 320u);  // the preset's vocabulary size: the tensors keep their shape
  EXPECT_EQ(tokens[318], "<|im_start|>");
  EXPECT_EQ(tokens[319], "<|im_end|>");
  EXPECT_EQ(types[318], 3);
  EXPECT_EQ(types[319], 3);
  EXPECT_EQ(std::count(tokens.begin(), tokens.end(), "</s>"), 1);
  // Everything before them is the plain vocabulary.
  const auto base = plain.file->get_string_array("tokenizer.ggml.tokens");
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.begin() + 318, base.begin()));

  // A control token never doubles as a piece; a full vocabulary says so.
  const GenVocab v = gen_vocab(2000, {"ab"});
  EXPECT_EQ(std::count(v.tokens.begin(), v.tokens.end(), "ab"), 1);
  EXPECT_EQ(v.types.back(), 3);
  EXPECT_ERROR(gen_vocab(259, {"<x>"}), "no room for 1 control tokens");
  EXPECT_ERROR(gen_vocab(300, {""}), "an empty control token");
}

TEST(GenModel, BadOptionsThrow) {
  GenModelOptions o;
  o.preset = "70b";
  EXPECT_ERROR(generate_model_bytes(o), "unknown preset '70b'");
  o = {};
  o.type = "iq2_xxs";
  EXPECT_ERROR(generate_model_bytes(o), "unknown type 'iq2_xxs'");
  o = {};
  o.arch = "gpt2";
  EXPECT_ERROR(generate_model_bytes(o), "unknown arch 'gpt2'");
  o = {};
  o.overrides.n_vocab = 258;
  EXPECT_ERROR(generate_model_bytes(o), "vocab 258 is smaller than");
  o = {};
  o.overrides.n_head_kv = 3;
  EXPECT_ERROR(generate_model_bytes(o), "is not a multiple of n_head_kv 3");
  o = {};
  EXPECT_ERROR(generate_model(o), "no output path");  // no path
}

TEST(GenModel, LargePresetShapes) {
  // Shapes only: generating them is for the CLI, not a unit test.
  GenModelOptions o;
  o.preset = "8b-shape";
  const GenModelShape s = gen_model_shape(o);
  EXPECT_EQ(s.n_embd, 4096);
  EXPECT_EQ(s.n_layer, 32);
  EXPECT_EQ(s.n_ff, 14336);
  EXPECT_EQ(s.n_vocab, 128256);
  o.preset = "500m";
  EXPECT_EQ(gen_model_shape(o).n_ff, 5632);
  o.preset = "1b";
  EXPECT_EQ(gen_model_shape(o).n_layer, 16);
}

}  // namespace
}  // namespace weft::tools
