// Prompt GEMM (gemm_q8.h): the scalar panel reference and the AVX-512 micro-kernel against the
// per-row scalar dot (vec_dot_ref on the same quantized activations) for every panel type, with
// rows and tokens that leave partial panels, token tiles and chunks; and matmul end to end for
// the K-quants (matmul_test covers the legacy types).
#include "kernels/gemm_q8.h"

#include "core/fp16.h"
#include "kernels/cpu_features.h"
#include "kernels/iquants_impl.h"
#include "kernels/isa.h"
#include "kernels/kquants_impl.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace weft::kernels::gemm {
namespace {

// The GEMM sums the same exact int32 block sums as vec_dot_ref; only the float accumulation of
// the per-block terms differs in order (and the product sc * d_a is rounded once more). Bound
// relative to sum |w_i a_i| of the dequantized values.
constexpr double kGemmRelTol = 2e-5;
// End to end (matmul vs matmul_ref with f32 activations): activation quantization error, ~1/254
// per element of a Q8 block; 1% of sum |w_i x_i| holds for Gaussian inputs.
constexpr double kActQuantRelTol = 1e-2;

constexpr DType kPanelTypes[] = {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_1,
                                 DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Case {
  DType type;
  int64_t rows, cols, n_tokens;
  size_t row_stride;
  std::vector<uint8_t> w;    // quantized rows
  std::vector<uint8_t> act;  // activation rows in vec_dot_type, row_bytes apart
  size_t act_row_bytes;
  std::vector<ActBlock> blocks;  // prepare_act_row of every token
  std::vector<float> wf, af;     // dequantized weights and activations

  WeightMatrix matrix() const { return {type, w.data(), rows, cols, row_stride}; }
};

Case make_case(DType t, int64_t rows, int64_t cols, int64_t n_tokens, uint32_t seed) {
  Case c{t, rows, cols, n_tokens, row_bytes(t, cols) + 4, {}, {}, 0, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(cols);
  c.w.assign(c.row_stride * rows, 0);
  c.wf.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    // Rows differ in scale and offset so the per-row scales, mins and corrections all matter.
    const float shift = 0.3f * normal(rng), scale = 0.5f + 0.1f * static_cast<float>(r % 7);
    for (auto& x : v) x = normal(rng) * scale + shift;
    quantize_row_ref(t, v.data(), c.w.data() + r * c.row_stride, cols);
    dequantize_row_ref(t, c.w.data() + r * c.row_stride, c.wf.data() + r * cols, cols);
  }
  const DType at = vec_dot_type(t);
  c.act_row_bytes = row_bytes(at, cols);
  c.act.resize(c.act_row_bytes * n_tokens);
  c.af.resize(cols * n_tokens);
  c.blocks.resize(cols / kQK * n_tokens);
  for (int64_t k = 0; k < n_tokens; ++k) {
    for (auto& x : v) x = normal(rng) + 0.2f;  // a nonzero mean exercises the offset terms
    quantize_row_ref(at, v.data(), c.act.data() + k * c.act_row_bytes, cols);
    dequantize_row_ref(at, c.act.data() + k * c.act_row_bytes, c.af.data() + k * cols, cols);
    prepare_act_row(t, c.act.data() + k * c.act_row_bytes, cols, c.blocks.data() + k, n_tokens);
  }
  return c;
}

double abs_dot(const Case& c, int64_t r, int64_t k) {
  double s = 0;
  for (int64_t i = 0; i < c.cols; ++i) s += std::fabs(double(c.wf[r * c.cols + i]) * c.af[k * c.cols + i]);
  return s;
}

// Runs gemm over rows [r0, r1) and checks every output against vec_dot_ref, and that rows
// outside [r0, r1) and the ldy padding stay untouched.
void check_gemm(GemmFn gemm, const Case& c, int64_t r0, int64_t r1, const std::string& name,
                const WeightMatrix* m = nullptr, size_t min_distinct = 0) {
  SCOPED_TRACE(name + " " + std::string(dtype_name(c.type)) + " rows " + std::to_string(r0) + ".." +
               std::to_string(r1) + " tokens=" + std::to_string(c.n_tokens));
  const int64_t ldy = c.rows + 3;
  const float sentinel = -777.f;
  std::vector<float> y(ldy * c.n_tokens, sentinel);
  gemm(m ? *m : c.matrix(), r0, r1, c.blocks.data(), c.n_tokens, y.data(), ldy);
  int64_t failures = 0;
  std::set<float> distinct;
  for (int64_t k = 0; k < c.n_tokens; ++k)
    for (int64_t r = 0; r < ldy; ++r) {
      const float got = y[k * ldy + r];
      if (r < r0 || r >= r1) {
        failures += got != sentinel;
        continue;
      }
      distinct.insert(got);
      const double want =
          vec_dot_ref(c.type, c.cols, c.w.data() + r * c.row_stride, c.act.data() + k * c.act_row_bytes);
      if (std::fabs(got - want) > kGemmRelTol * abs_dot(c, r, k) && failures++ < 5)
        ADD_FAILURE() << "token " << k << " row " << r << ": got " << got << ", vec_dot_ref " << want;
    }
  EXPECT_EQ(failures, 0);
  // Outputs vary, unless the case says how many distinct ones it has (identical rows).
  if (min_distinct)
    EXPECT_GE(distinct.size(), min_distinct);
  else
    EXPECT_GT(distinct.size(), static_cast<size_t>((r1 - r0) * c.n_tokens / 2)) << "outputs do not vary";
}

TEST(Gemm, PanelFormatsMatchTheirTypes) {
  for (DType t : kPanelTypes) EXPECT_TRUE(has_panel(t)) << dtype_name(t);
  EXPECT_FALSE(has_panel(DType::F32));
  EXPECT_FALSE(has_panel(DType::F16));
  EXPECT_EQ(panel_format(DType::Q4_0).block_bytes(), 576u);
  EXPECT_EQ(panel_format(DType::Q4_K).block_bytes(), 640u);
  EXPECT_EQ(panel_format(DType::Q6_K).block_bytes(), 640u);
}

TEST(Gemm, ReferenceMatchesVecDot) {
  for (DType t : kPanelTypes) {
    // 21 rows: one full panel and one of 5; 11 tokens: a full tile of 8 and one of 3.
    const Case c = make_case(t, 21, 512, 11, 11);
    check_gemm(gemm_ref, c, 0, 21, "ref");
    check_gemm(gemm_ref, c, 16, 21, "ref");
  }
}

TEST(Gemm, Avx512MatchesVecDot) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
  for (DType t : kPanelTypes) {
    const GemmFn gemm = find(Isa::Avx512, t);
    ASSERT_NE(gemm, nullptr) << dtype_name(t);
    // Every token-tile width 1..8 and a second 128-token chunk, over full and partial panels.
    for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 7, 8, 13, 131}) {
      const Case c = make_case(t, 37, 256, n_tokens, 100 + static_cast<uint32_t>(n_tokens));
      check_gemm(gemm, c, 0, 37, "avx512");
      check_gemm(gemm, c, 16, 32, "avx512");
      check_gemm(gemm, c, 32, 37, "avx512");
    }
  }
  EXPECT_EQ(find(Isa::Avx512, DType::F16), nullptr);
}

// A matrix repacked into panels (WeightLayout::Panels), in a 64-byte aligned buffer.
struct Repacked {
  std::vector<uint8_t> bytes;
  WeightMatrix m;
  explicit Repacked(const WeightMatrix& w) : bytes(kernels::repacked_bytes(w) + 64) {
    const auto addr = reinterpret_cast<uintptr_t>(bytes.data());
    m = kernels::repack(w, bytes.data() + (64 - addr % 64) % 64);
  }
};

// The types repacked into panels at load (has_repacked).
constexpr DType kRepackedTypes[] = {DType::Q4_0,   DType::Q4_1,   DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                    DType::Q2_K,   DType::Q3_K,   DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                    DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

TEST(Gemm, RepackedMatchesVecDot) {
  // CTest runs this with WEFT_PAIR_PANELS=0 and =1 too (tests/CMakeLists.txt): each must take.
  if (const char* pairs = std::getenv("WEFT_PAIR_PANELS")) {
    EXPECT_EQ(cpu_features().pair_panels, pairs == std::string("1"));
  }
  EXPECT_EQ(find_repacked(Isa::Avx512, DType::F16), nullptr);
  EXPECT_EQ(find_repacked(Isa::Scalar, DType::Q4_0), nullptr);
  int levels_run = 0;
  for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
    if (!isa_supported(isa)) {
      for (DType t : kRepackedTypes) EXPECT_EQ(find_repacked(isa, t), nullptr);
      continue;
    }
    ++levels_run;
    for (DType t : kRepackedTypes) {
      const GemmFn gemm = find_repacked(isa, t);
      ASSERT_NE(gemm, nullptr) << isa_name(isa) << " " << dtype_name(t);
      for (int64_t n_tokens : {1, 2, 3, 8, 13, 131}) {
        // 37 rows: a last panel of 5 whose absent rows are zero; rows 4 bytes apart past their
        // blocks; 512 columns: two K-quant super-blocks.
        const Case c = make_case(t, 37, 512, n_tokens, 300 + static_cast<uint32_t>(n_tokens));
        const Repacked p(c.matrix());
        ASSERT_EQ(p.m.layout, WeightLayout::Panels);
        EXPECT_EQ(kernels::repacked_bytes(c.matrix()), 3u * repacked_panel_bytes(t, 512));  // 3 panels
        const size_t ggml = kPanelRows * row_bytes(t, 512);
        if (t == DType::Q3_K)  // plus its 16 six-bit scales unpacked to a byte each
          EXPECT_EQ(repacked_panel_bytes(t, 512), ggml + 2 * (kPanelRows * 16 - kPanelRows * 12));
        else if (t == DType::IQ4_XS)  // plus its 8 six-bit scales unpacked to a byte each
          EXPECT_EQ(repacked_panel_bytes(t, 512), ggml + 2 * (kPanelRows * 8 - kPanelRows * 6));
        else  // ggml's bytes, rearranged (Q4_K / Q5_K: the scales and mins still packed)
          EXPECT_EQ(repacked_panel_bytes(t, 512), ggml);
        const std::string name = std::string("repacked ") + isa_name(isa);
        // One token reads two panels at a time (pair tiles): rows 0..31 as a pair, 32..36 alone;
        // 16..36 a pair whose second panel has 5 rows.
        check_gemm(gemm, c, 0, 37, name, &p.m);
        check_gemm(gemm, c, 16, 32, name, &p.m);
        check_gemm(gemm, c, 32, 37, name, &p.m);
        check_gemm(gemm, c, 16, 37, name, &p.m);
      }
    }
  }
  if (levels_run == 0) GTEST_SKIP() << "no SIMD level with repacked kernels on this CPU";
}

// The Avx2 level's repacked GEMMs: plain AVX2, and one-token tiles on AVX-VNNI where the CPU has it
// (find_repacked(Isa::Avx2) runs that one there, so the plain tiles are checked by name too).
std::vector<std::pair<std::string, GemmFn>> avx2_variants(DType t) {
  std::vector<std::pair<std::string, GemmFn>> v;
  if (isa_supported(Isa::Avx2)) v.emplace_back("avx2", find_repacked<Isa::Avx2>(t));
  if (const GemmFn vnni = find_avx_vnni(t)) v.emplace_back("avx-vnni", vnni);
  return v;
}

TEST(Gemm, RepackedAvx2WithAndWithoutAvxVnni) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  EXPECT_EQ(find_avx_vnni(DType::F16), nullptr);
  for (DType t : kRepackedTypes) {
    const auto variants = avx2_variants(t);
    ASSERT_EQ(variants.size(), cpu_features().avx_vnni ? 2u : 1u) << dtype_name(t);
    if (cpu_features().avx_vnni) {
      EXPECT_EQ(find_repacked(Isa::Avx2, t), variants[1].second) << dtype_name(t);
    }
    for (const auto& [name, gemm] : variants) {
      ASSERT_NE(gemm, nullptr) << name << " " << dtype_name(t);
      for (int64_t n_tokens : {1, 3}) {  // one token's tile; two tokens' and one's
        const Case c = make_case(t, 37, 512, n_tokens, 700 + static_cast<uint32_t>(n_tokens));
        const Repacked p(c.matrix());
        check_gemm(gemm, c, 0, 37, "repacked " + name, &p.m);
        check_gemm(gemm, c, 16, 37, "repacked " + name, &p.m);  // a pair whose second panel has 5 rows
        check_gemm(gemm, c, 32, 37, "repacked " + name, &p.m);
      }
    }
  }
  if (!cpu_features().avx_vnni) GTEST_SKIP() << "plain AVX2 checked; no AVX-VNNI on this CPU";
}

// The types find_amx runs: int sub-block scales, folded into the levels (ScaledLayout).
constexpr DType kScaledTypes[] = {DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

// What AMX's tiles compute from a ScaledLayout panel, in plain C++: per super-block the int sum of
// (128 hi + lo) x a, times d_w d_a, then each block's min x s_a. Runs wherever the Avx512 level does,
// so the conversion is checked on CPUs without AMX too.
void scaled_ref(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
                int64_t ldy) {
  using L = ScaledLayout;
  const bool has_min = panel_format(w.type).has_min;
  const int64_t n_super = w.cols / 256;
  std::vector<uint8_t> panel(L::bytes(has_min) * n_super);
  for (int64_t p = r0; p < r1; p += kPanelRows) {
    unpack_scaled_avx512(w.type)(w.data + p / kPanelRows * repacked_panel_bytes(w.type, w.cols), n_super, panel.data());
    for (int64_t r = p; r < std::min(r1, p + kPanelRows); ++r)
      for (int64_t t = 0; t < n_tokens; ++t) {
        float acc = 0;
        for (int64_t s = 0; s < n_super; ++s) {
          const uint8_t* sp = panel.data() + L::bytes(has_min) * s;
          int32_t sum = 0;
          for (int j = 0; j < 8; ++j)
            for (int g = 0; g < kGroups; ++g)
              for (int i = 0; i < 4; ++i) {
                const size_t at = 64 * static_cast<size_t>(kGroups * j + g) + 4 * static_cast<size_t>(r - p) + i;
                const int32_t wv = 128 * static_cast<int8_t>(sp[L::kHi + at]) + static_cast<int8_t>(sp[L::kLo + at]);
                EXPECT_GE(static_cast<int8_t>(sp[L::kLo + at]), 0);
                sum += wv * act[(8 * s + j) * n_tokens + t].q[4 * g + i];
              }
          float d;
          std::memcpy(&d, sp + L::kD + 4 * (r - p), 4);
          acc += static_cast<float>(sum) * (d * act[8 * s * n_tokens + t].d);
          for (int j = 0; has_min && j < 8; ++j) {
            float mn;
            std::memcpy(&mn, sp + L::kMins + 64 * j + 4 * (r - p), 4);
            acc += mn * act[(8 * s + j) * n_tokens + t].s;
          }
        }
        y[t * ldy + r] = acc;
      }
  }
}

TEST(Gemm, ScaledPanelsKeepTheDot) {
  if (!isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
  for (DType t : kRepackedTypes)
    EXPECT_EQ(unpack_scaled_avx512(t) != nullptr,
              std::find(std::begin(kScaledTypes), std::end(kScaledTypes), t) != std::end(kScaledTypes))
        << dtype_name(t);
  for (DType t : kScaledTypes) {
    const Case c = make_case(t, 37, 512, 3, 41);
    const Repacked p(c.matrix());
    check_gemm(scaled_ref, c, 0, 37, "scaled ref", &p.m);
  }
}

// The AMX tiles sum the same ints as the VNNI ones and take the same float steps in the same order:
// their outputs are the same floats, so a prompt's results do not depend on which a CPU has.
void expect_same_floats(GemmFn amx, GemmFn vnni, const Case& c, const WeightMatrix& m) {
  ASSERT_NE(vnni, nullptr);
  std::vector<float> a(c.rows * c.n_tokens, 1.f), v(c.rows * c.n_tokens, 2.f);
  amx(m, 0, c.rows, c.blocks.data(), c.n_tokens, a.data(), c.rows);
  vnni(m, 0, c.rows, c.blocks.data(), c.n_tokens, v.data(), c.rows);
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != v[i];
  EXPECT_EQ(differ, 0) << dtype_name(c.type) << " tokens " << c.n_tokens << ": AMX and VNNI outputs differ";
}

TEST(Gemm, AmxMatchesVecDot) {
  if (!cpu_features().amx) {
    EXPECT_EQ(find_amx(Isa::Avx512, make_case(DType::Q4_0, 16, 256, 1, 3).matrix()), nullptr);
    GTEST_SKIP() << "no usable AMX on this CPU";
  }
  // Q2_K (two mins per block) and the super-block types in rows stay on VNNI.
  EXPECT_EQ(find_amx(Isa::Avx512, Repacked(make_case(DType::Q2_K, 16, 256, 1, 3).matrix()).m), nullptr);
  EXPECT_EQ(find_amx(Isa::Avx512, make_case(DType::Q4_K, 16, 256, 1, 3).matrix()), nullptr);
  for (DType t : kRepackedTypes) {
    if (t == DType::Q2_K) continue;
    // One token, a partial tile, a full one, one past it, and a second 128-token chunk.
    for (int64_t n_tokens : {1, 5, 16, 17, 131}) {
      const Case c = make_case(t, 37, 512, n_tokens, 500 + static_cast<uint32_t>(n_tokens));
      const Repacked p(c.matrix());
      const GemmFn gemm = find_amx(Isa::Avx512, p.m);
      ASSERT_NE(gemm, nullptr) << dtype_name(t);
      EXPECT_EQ(find_amx(Isa::Avx2, p.m), nullptr) << dtype_name(t) << ": the tiles take the Avx512 level's blocks";
      check_gemm(gemm, c, 0, 37, "amx", &p.m);
      check_gemm(gemm, c, 16, 32, "amx", &p.m);
      check_gemm(gemm, c, 32, 37, "amx", &p.m);
      expect_same_floats(gemm, find_repacked(Isa::Avx512, t), c, p.m);
      if (has_panel(t) && !has_super_blocks(t)) {  // the legacy types in rows too
        const GemmFn rows = find_amx(Isa::Avx512, c.matrix());
        ASSERT_NE(rows, nullptr) << dtype_name(t);
        check_gemm(rows, c, 0, 37, "amx rows");
        check_gemm(rows, c, 32, 37, "amx rows");
        expect_same_floats(rows, find(Isa::Avx512, t), c, c.matrix());
      }
    }
  }
}

// matmul on a repacked matrix (decode, small batches and prompts alike) gives what it gives on
// the rows, for the whole matrix and for a column slice viewed in place (as WeightStore repacks it).
TEST(Gemm, MatmulOnRepackedMatchesRows) {
  int types_run = 0;
  for (DType t : kRepackedTypes) {
    // Columns q .. 3q of every row, q = 128 (the K-quants: a super-block, 256).
    const int64_t q = std::max<int64_t>(128, block_size(t));
    const Case c = make_case(t, 45, 4 * q, 1, 17);
    WeightMatrix slice = c.matrix();
    slice.data += row_bytes(t, q);
    slice.cols = 2 * q;
    if (!kernels::can_repack(c.matrix())) continue;  // no panel kernel for t on this CPU
    ++types_run;
    ThreadPool pool(2, {}, /*spin=*/false);
    MatmulScratch scratch;
    for (const WeightMatrix& w : {c.matrix(), slice}) {
      const Repacked p(w);
      for (int64_t n_tokens : {1, 2, 3, 4, 9, 40, 70}) {  // 40, 70: AMX where the CPU has it
        std::mt19937 rng(static_cast<uint32_t>(n_tokens));
        std::normal_distribution<float> normal(0.f, 1.f);
        std::vector<float> x(w.cols * n_tokens);
        for (auto& v : x) v = normal(rng);
        std::vector<float> y(w.rows * n_tokens), y_ref(w.rows * n_tokens);
        matmul(p.m, x.data(), w.cols, n_tokens, y.data(), w.rows, pool, scratch);
        matmul_ref(w, x.data(), w.cols, n_tokens, y_ref.data(), w.rows);
        int64_t failures = 0;
        std::vector<float> row(w.cols);
        for (size_t i = 0; i < y.size(); ++i) {
          const int64_t r = static_cast<int64_t>(i) % w.rows, k = static_cast<int64_t>(i) / w.rows;
          dequantize_row_ref(t, w.data + r * w.row_stride, row.data(), w.cols);
          double scale = 0;  // sum |w_j x_j|
          for (int64_t j = 0; j < w.cols; ++j) scale += std::fabs(double(row[j]) * x[k * w.cols + j]);
          if (std::fabs(y[i] - y_ref[i]) > kActQuantRelTol * scale && failures++ < 5)
            ADD_FAILURE() << dtype_name(t) << " cols " << w.cols << " tokens " << n_tokens << " token " << k << " row "
                          << r << ": " << y[i] << " vs " << y_ref[i];
        }
        EXPECT_EQ(failures, 0);
        EXPECT_NE(y[0], y[1]);
      }
    }
  }
  if (types_run == 0) GTEST_SKIP() << "no repacked kernel on this CPU";
}

TEST(Gemm, Avx2MatchesVecDot) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  for (DType t : kPanelTypes) {
    const GemmFn gemm = find(Isa::Avx2, t);
    ASSERT_NE(gemm, nullptr) << dtype_name(t);
    for (int64_t n_tokens : {1, 2, 5, 131}) {
      const Case c = make_case(t, 37, 256, n_tokens, 200 + static_cast<uint32_t>(n_tokens));
      check_gemm(gemm, c, 0, 37, "avx2");
      check_gemm(gemm, c, 32, 37, "avx2");
    }
  }
}

// Q8_0's extreme levels against activations of full magnitude: pairs of products that would
// saturate vpmaddubsw's int16 sums if the levels were read unsigned (q + 128), at every ISA.
TEST(Gemm, Q8_0ExtremeLevelsDoNotSaturate) {
  Case c = make_case(DType::Q8_0, 16, 64, 3, 77);
  const size_t block = row_bytes(DType::Q8_0, kQK);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t b = 0; b < c.cols / kQK; ++b)
      for (int64_t i = 0; i < kQK; ++i) {  // rows of -128, of 127, and mixed
        const int8_t q = r % 3 == 0 ? -128 : r % 3 == 1 ? 127 : ((i + r) % 4 ? -128 : 127);
        c.w[r * c.row_stride + b * block + 2 + i] = static_cast<uint8_t>(q);
      }
  for (int64_t r = 0; r < c.rows; ++r)
    dequantize_row_ref(DType::Q8_0, c.w.data() + r * c.row_stride, c.wf.data() + r * c.cols, c.cols);
  std::vector<float> v(c.cols);
  for (int64_t k = 0; k < c.n_tokens; ++k) {  // every value at full scale: levels of +-127
    for (int64_t j = 0; j < c.cols; ++j) v[j] = j % (k + 2) == 0 ? -3.f : 3.f;
    quantize_row_ref(DType::Q8_0, v.data(), c.act.data() + k * c.act_row_bytes, c.cols);
    dequantize_row_ref(DType::Q8_0, c.act.data() + k * c.act_row_bytes, c.af.data() + k * c.cols, c.cols);
    prepare_act_row(DType::Q8_0, c.act.data() + k * c.act_row_bytes, c.cols, c.blocks.data() + k, c.n_tokens);
  }
  const Repacked p(c.matrix());  // its tiles read the levels in place (AVX2: one token's split, biased_block)
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!isa_supported(isa)) continue;
    check_gemm(find(isa, DType::Q8_0), c, 0, c.rows, isa_name(isa));
    check_gemm(find_repacked(isa, DType::Q8_0), c, 0, c.rows, std::string("repacked ") + isa_name(isa), &p.m);
  }
  if (const GemmFn amx = find_amx(Isa::Avx512, p.m)) check_gemm(amx, c, 0, c.rows, "amx", &p.m);
}

// The repacked K-quant tiles sum a super-block's int dots times int sub-block scales in int32:
// blocks at the extremes of every field (largest levels of the widest sign, largest scales, every
// activation at +-127) must not overflow it.
template <class Block>
void fill_extreme(Case& c, uint8_t fill, void (*fix)(Block&)) {
  for (int64_t r = 0; r < c.rows; ++r) {
    auto* blocks = reinterpret_cast<Block*>(c.w.data() + r * c.row_stride);
    for (int64_t b = 0; b < c.cols / block_size(c.type); ++b) {
      std::memset(&blocks[b], fill, sizeof(Block));
      fix(blocks[b]);
    }
    dequantize_row_ref(c.type, c.w.data() + r * c.row_stride, c.wf.data() + r * c.cols, c.cols);
  }
}

TEST(Gemm, ExtremeBlocksDoNotOverflow) {
  constexpr uint16_t kOne = 0x3C00;  // fp16 1.0
  int runs = 0;
  for (DType t : {DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    Case c = make_case(t, 32, 1024, 3, 91);
    switch (t) {         // levels and scales of the largest product, d (and dmin) 1
      case DType::Q8_0:  // -128: |q| is 128, one past vpmaddubsw's signed range
        fill_extreme<legacy::BlockQ8_0>(c, 0x80, [](legacy::BlockQ8_0& b) { b.d = kOne; });
        break;
      case DType::Q2_K:
        fill_extreme<kquants::BlockQ2K>(c, 0xFF, [](kquants::BlockQ2K& b) { b.d = b.dmin = kOne; });
        break;
      case DType::Q3_K:
        fill_extreme<kquants::BlockQ3K>(c, 0x00, [](kquants::BlockQ3K& b) { b.d = kOne; });
        break;  // -4 x -32
      case DType::Q4_K:
        fill_extreme<kquants::BlockQ4K>(c, 0xFF, [](kquants::BlockQ4K& b) { b.d = b.dmin = kOne; });
        break;
      case DType::Q5_K:
        fill_extreme<kquants::BlockQ5K>(c, 0xFF, [](kquants::BlockQ5K& b) { b.d = b.dmin = kOne; });
        break;
      case DType::IQ4_XS:  // -127 x -32
        fill_extreme<iquants::BlockIQ4XS>(c, 0x00, [](iquants::BlockIQ4XS& b) { b.d = kOne; });
        break;
      default:  // -32 x -128
        fill_extreme<kquants::BlockQ6K>(c, 0x00, [](kquants::BlockQ6K& b) {
          std::memset(b.scales, 0x80, sizeof b.scales);
          b.d = kOne;
        });
    }
    std::vector<float> v(c.cols);
    for (int64_t k = 0; k < c.n_tokens; ++k) {  // every activation level at +-127
      for (int64_t j = 0; j < c.cols; ++j) v[j] = k == 1 ? -3.f : 3.f;
      const DType at = vec_dot_type(t);
      quantize_row_ref(at, v.data(), c.act.data() + k * c.act_row_bytes, c.cols);
      dequantize_row_ref(at, c.act.data() + k * c.act_row_bytes, c.af.data() + k * c.cols, c.cols);
      prepare_act_row(t, c.act.data() + k * c.act_row_bytes, c.cols, c.blocks.data() + k, c.n_tokens);
    }
    const Repacked p(c.matrix());
    auto gemms = avx2_variants(t);
    if (isa_supported(Isa::Avx512)) gemms.emplace_back("avx512", find_repacked(Isa::Avx512, t));
    for (const auto& [name, gemm] : gemms) {
      ASSERT_NE(gemm, nullptr) << name;
      ++runs;
      check_gemm(gemm, c, 0, c.rows, "extreme " + name, &p.m, /*min_distinct=*/1);
    }
    if (isa_supported(Isa::Avx512) && unpack_scaled_avx512(t))  // |128 hi + lo| at its largest
      check_gemm(scaled_ref, c, 0, c.rows, "extreme scaled ref", &p.m, /*min_distinct=*/1);
    if (const GemmFn amx = find_amx(Isa::Avx512, p.m))
      check_gemm(amx, c, 0, c.rows, "extreme amx", &p.m, /*min_distinct=*/1);
  }
  if (runs == 0) GTEST_SKIP() << "no SIMD level with repacked kernels on this CPU";
}

// A batch through a K-quant's repacked tiles gives each token its one-token bits where the matrix is
// batch-invariant (--exact): the AVX-512 batch tiles otherwise sum a super-block's scaled sub-block
// sums in floats, which round once the running sum passes 2^24 with odd terms. Q4_K rows of level 15
// (one 14 a sub-block: odd sums), scale 63 and no min, against activations of 127: each sub-block's
// term 60833 x 63, five of them past 2^24.
TEST(Gemm, BatchInvariantTilesGiveOneTokensBits) {
  Case c = make_case(DType::Q4_K, 16, 1024, 1, 5);
  fill_extreme<kquants::BlockQ4K>(c, 0xFF, [](kquants::BlockQ4K& b) {
    b.d = 0x3C00;  // fp16 1.0
    b.dmin = 0;
    for (int chunk = 0; chunk < 4; ++chunk) b.qs[chunk * 32] = 0xEE;
  });
  if (!kernels::can_repack(c.matrix())) GTEST_SKIP() << "no Q4_K panels on this CPU";
  Repacked p(c.matrix());
  ThreadPool pool(1, {}, /*spin=*/false);
  MatmulScratch scratch;
  const int64_t n = 8;  // one tile of 8 tokens (below AMX's batches)
  const std::vector<float> x(c.cols * n, 3.f);
  std::vector<float> one(c.rows);
  matmul(p.m, x.data(), c.cols, 1, one.data(), c.rows, pool, scratch);
  for (const bool invariant : {true, false}) {
    p.m.batch_invariant = invariant;
    std::vector<float> batch(c.rows * n);
    matmul(p.m, x.data(), c.cols, n, batch.data(), c.rows, pool, scratch);
    int64_t differ = 0;
    for (int64_t t = 0; t < n; ++t)
      differ += std::memcmp(batch.data() + t * c.rows, one.data(), c.rows * sizeof(float)) != 0;
    if (invariant) {
      EXPECT_EQ(differ, 0) << "batch-invariant tiles";
    } else if (detected_isa() == Isa::Avx512) {  // the float-scale tiles: the case must reach their rounding
      EXPECT_EQ(differ, n) << "the float-scale batch tiles should round these sums";
    }
  }
}

// MXFP4's E8M0 scales at their ends, which every repacked GEMM turns into floats in registers: rows
// of exponents 0, 1, 2 (2^-128 .. 2^-126, subnormal floats) and 127 against activations of about 1e6
// (fp16 d near its largest, so that the dots stay normal floats), and rows of 127, 254 and 255 (up to
// 2^127) against activations of about 1e-6 (d near fp16's smallest, 2^-24), their levels cut to 0 and
// +-1 so that the dequantized rows the tolerance is taken from stay finite. Three panels, the last of 5
// rows; one token (pair tiles), a tile and a half, a batch.
TEST(Gemm, Mxfp4EdgeExponents) {
  int runs = 0;
  for (bool high : {false, true}) {
    const std::vector<uint8_t> exps = high ? std::vector<uint8_t>{127, 254, 255} : std::vector<uint8_t>{0, 1, 2, 127};
    for (int64_t n_tokens : {1, 3, 9}) {
      Case c = make_case(DType::MXFP4, 37, 256, n_tokens, 60 + static_cast<uint32_t>(n_tokens));
      for (int64_t r = 0; r < c.rows; ++r) {
        auto* blocks = reinterpret_cast<iquants::BlockMXFP4*>(c.w.data() + r * c.row_stride);
        const uint8_t e = exps[r % exps.size()];
        for (int64_t b = 0; b < c.cols / kQK; ++b) {
          blocks[b].e = e;
          if (e >= 254)
            for (auto& q : blocks[b].qs) q &= 0x99;  // nibbles 0, 1, 8, 9: levels 0, 1, 0, -1
        }
        dequantize_row_ref(c.type, c.w.data() + r * c.row_stride, c.wf.data() + r * c.cols, c.cols);
      }
      std::vector<float> v(c.cols);
      std::mt19937 rng(3);
      std::normal_distribution<float> normal(0.f, 1.f);
      for (int64_t k = 0; k < n_tokens; ++k) {
        for (auto& x : v) x = (high ? 2e-6f : 1e6f) * normal(rng);
        quantize_row_ref(DType::Q8_0, v.data(), c.act.data() + k * c.act_row_bytes, c.cols);
        dequantize_row_ref(DType::Q8_0, c.act.data() + k * c.act_row_bytes, c.af.data() + k * c.cols, c.cols);
        prepare_act_row(c.type, c.act.data() + k * c.act_row_bytes, c.cols, c.blocks.data() + k, n_tokens);
      }
      const Repacked p(c.matrix());
      auto gemms = avx2_variants(DType::MXFP4);
      if (isa_supported(Isa::Avx512)) gemms.emplace_back("avx512", find_repacked(Isa::Avx512, DType::MXFP4));
      if (const GemmFn amx = find_amx(Isa::Avx512, p.m)) gemms.emplace_back("amx", amx);
      for (const auto& [name, gemm] : gemms) {
        ASSERT_NE(gemm, nullptr) << name;
        ++runs;
        const std::string what = std::string(high ? "large" : "small") + " exponents " + name;
        check_gemm(gemm, c, 0, c.rows, what, &p.m);
        check_gemm(gemm, c, 16, 37, what, &p.m);
      }
      for (int64_t r = 0; r < c.rows; ++r)  // the outputs are finite and not flushed to zero
        EXPECT_TRUE(std::isnormal(vec_dot_ref(c.type, c.cols, c.w.data() + r * c.row_stride,
                                              c.act.data() + (n_tokens - 1) * c.act_row_bytes)))
            << "row " << r << (high ? " large" : " small");
    }
  }
  if (runs == 0) GTEST_SKIP() << "no SIMD level with repacked kernels on this CPU";
}

// quantize_act_blocks (one pass where a level has legacy::act_blocks) writes the same bytes as the
// ref quantizer's row through prepare_act_row, at every level and for every panel type: rows with
// a zero block, a block of one huge value, and halves (the quantizer's rounding ties).
TEST(Gemm, ActivationBlocksInOnePassMatchTheTwoSteps) {
  const int64_t cols = 256, n_tokens = 3;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(cols * n_tokens);
  for (auto& v : x) v = normal(rng) * 3.f + 0.5f;
  std::fill_n(x.begin() + 32, 32, 0.f);  // an all-zero block: d = 0
  x[70] = 3e4f;                          // one value dominates its block
  for (int i = 0; i < 32; ++i) x[cols + 96 + i] = 0.5f * static_cast<float>(i - 16) * (127.f / 8.f);  // exact halves
  int fused_levels = 0;
  for (const DType t : kPanelTypes)
    for (int l = 0; l < kIsaCount; ++l) {
      const auto isa = static_cast<Isa>(l);
      const TypeKernels* k = kernels_for_isa(t, isa);
      if (!k) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " at " + std::string(isa_name(isa)));
      const DType at = vec_dot_type(t);
      std::vector<uint8_t> row(row_bytes(at, cols));
      std::vector<ActBlock> want(cols / kQK * n_tokens), got(want.size());
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        quantize_row_ref(at, x.data() + tok * cols, row.data(), cols);
        prepare_act_row(t, row.data(), cols, want.data() + tok, n_tokens);
        quantize_act_blocks(*k, x.data() + tok * cols, cols, got.data() + tok, n_tokens, row.data());
      }
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(ActBlock)), 0);
      fused_levels += isa != Isa::Scalar && (t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0);
    }
  if (isa_supported(Isa::Avx2)) {
    EXPECT_GT(fused_levels, 0) << "no level converted in one pass";
  }
}

TEST(Gemm, MatmulOfKQuantsMatchesReferences) {
  // matmul_test covers the legacy types through the same GEMM path; here the K-quants, with
  // enough tokens to take the GEMM path (and 2 for the rows_dot one) and 3 threads.
  ThreadPool pool(3, {}, /*spin=*/false);
  MatmulScratch scratch;
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t n_tokens : {2, 9}) {
      const Case c = make_case(t, 50, 768, 1, 5);
      std::mt19937 rng(9);
      std::normal_distribution<float> normal(0.f, 1.f);
      std::vector<float> x(c.cols * n_tokens);
      for (auto& v : x) v = normal(rng);
      const int64_t ldy = c.rows;
      std::vector<float> y(ldy * n_tokens), y_ref(ldy * n_tokens);
      matmul(c.matrix(), x.data(), c.cols, n_tokens, y.data(), ldy, pool, scratch);
      matmul_ref(c.matrix(), x.data(), c.cols, n_tokens, y_ref.data(), ldy);
      int64_t failures = 0;
      for (int64_t k = 0; k < n_tokens; ++k)
        for (int64_t r = 0; r < c.rows; ++r) {
          double scale = 0;
          for (int64_t i = 0; i < c.cols; ++i) scale += std::fabs(double(c.wf[r * c.cols + i]) * x[k * c.cols + i]);
          if (std::fabs(y[k * ldy + r] - y_ref[k * ldy + r]) > kActQuantRelTol * scale && failures++ < 5)
            ADD_FAILURE() << dtype_name(t) << " token " << k << " row " << r << ": " << y[k * ldy + r] << " vs "
                          << y_ref[k * ldy + r];
        }
      EXPECT_EQ(failures, 0);
      EXPECT_NE(y[0], y[1]);
    }
}

}  // namespace
}  // namespace weft::kernels::gemm
