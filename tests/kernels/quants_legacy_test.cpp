// Legacy quant + float kernels: bit layout pinned by hand-built blocks, quantizer round trips,
// and every SIMD variant this CPU runs checked against the scalar reference on seeded inputs.
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu_features.h"
#include "kernels/quants.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace weft::kernels {
namespace {

constexpr DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                  DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};
constexpr Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};

// SIMD dots differ from the double-accumulating reference only by f32 summation order.
constexpr double kDotRelTol = 2e-5;  // of sum |w_i a_i|
// vec_dot_ref against the dot of the dequantized rows: equal but for Q8_1's s, which is
// fp16(d * sum) rather than fp16(d) * sum (relative 2^-11 of the min term).
constexpr double kDequantDotRelTol = 1e-3;

std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.01f, 4.f);
  std::vector<float> x(n);
  for (int64_t b = 0; b < n; b += 32) {
    const float s = scale(rng);  // blocks of different magnitude, one shifted off zero
    const float shift = (b / 32) % 3 == 1 ? s : 0.f;
    for (int64_t i = b; i < std::min(n, b + 32); ++i) x[i] = normal(rng) * s + shift;
  }
  if (n >= 64) {
    // A block of exact ties for the activation quantizers: amax 127 gives d = 1, so x.5 values
    // must round away from zero as roundf does.
    for (int i = 0; i < 32; ++i) x[32 + i] = (i % 2 ? -1.f : 1.f) * (static_cast<float>(i) + 0.5f);
    x[32] = 127.f;
  }
  return x;
}

void expect_spread(const std::vector<float>& x) {
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (float v : x) var += (v - mean) * (v - mean);
  ASSERT_GT(var / static_cast<double>(x.size()), 1e-3) << "test input does not vary";
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row_ref(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const void* q, int64_t n) {
  std::vector<float> x(n);
  dequantize_row_ref(t, q, x.data(), n);
  return x;
}

double abs_dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

// ---- bit layout ----

TEST(QuantsLegacy, KnownBlocksDequantize) {
  // Q4_0: d = 0.5; byte j holds element j (low nibble j) and element j+16 (high nibble 15-j).
  uint8_t q4_0[18];
  const uint16_t half_05 = 0x3800, half_025 = 0x3400, half_m1 = 0xBC00;
  std::memcpy(q4_0, &half_05, 2);
  for (int j = 0; j < 16; ++j) q4_0[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // Q4_1: d = 0.25, m = -1, same nibbles.
  uint8_t q4_1[20];
  std::memcpy(q4_1, &half_025, 2);
  std::memcpy(q4_1 + 2, &half_m1, 2);
  std::memcpy(q4_1 + 4, q4_0 + 2, 16);
  // Q5_0 / Q5_1: same nibbles plus qh (little endian) giving bit 4 of element j.
  const uint32_t qh = 0xA5A5F00Fu;
  uint8_t q5_0[22], q5_1[24];
  std::memcpy(q5_0, &half_05, 2);
  std::memcpy(q5_0 + 2, &qh, 4);
  std::memcpy(q5_0 + 6, q4_0 + 2, 16);
  std::memcpy(q5_1, q4_1, 4);
  std::memcpy(q5_1 + 4, &qh, 4);
  std::memcpy(q5_1 + 8, q4_0 + 2, 16);
  // Q8_0: d = 0.25, qs[j] = j - 16. Q8_1: same with s = 0.5 (ignored by dequantize).
  uint8_t q8_0[34], q8_1[36];
  std::memcpy(q8_0, &half_025, 2);
  std::memcpy(q8_1, &half_025, 2);
  std::memcpy(q8_1 + 2, &half_05, 2);
  for (int j = 0; j < 32; ++j) q8_0[2 + j] = q8_1[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));

  for (int j = 0; j < 32; ++j) {
    const int nib = j < 16 ? j : 15 - (j - 16);
    const int hi = (qh >> j) & 1;
    SCOPED_TRACE(j);
    EXPECT_EQ(dequantize(DType::Q4_0, q4_0, 32)[j], (nib - 8) * 0.5f);
    EXPECT_EQ(dequantize(DType::Q4_1, q4_1, 32)[j], nib * 0.25f - 1.f);
    EXPECT_EQ(dequantize(DType::Q5_0, q5_0, 32)[j], ((nib | hi << 4) - 16) * 0.5f);
    EXPECT_EQ(dequantize(DType::Q5_1, q5_1, 32)[j], (nib | hi << 4) * 0.25f - 1.f);
    EXPECT_EQ(dequantize(DType::Q8_0, q8_0, 32)[j], (j - 16) * 0.25f);
    EXPECT_EQ(dequantize(DType::Q8_1, q8_1, 32)[j], (j - 16) * 0.25f);
  }
  const uint16_t f16[2] = {0x3C00, 0xC100}, bf16[2] = {0x3F80, 0xC020};
  EXPECT_EQ(dequantize(DType::F16, f16, 2), (std::vector<float>{1.f, -2.5f}));
  EXPECT_EQ(dequantize(DType::BF16, bf16, 2), (std::vector<float>{1.f, -2.5f}));
}

TEST(QuantsLegacy, KnownBlockQuantizeQ4_0) {
  // x[j] = j - 16: signed max-abs is -16, so d = -16 / -8 = 2 and q = min(15, int(x/2 + 8.5)).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const auto q = quantize(DType::Q4_0, x);
  uint16_t d;
  std::memcpy(&d, q.data(), 2);
  EXPECT_EQ(d, 0x4000);  // 2.0
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(q[2 + j] & 0x0F, std::min(15, (j + 1) / 2)) << j;
    EXPECT_EQ(q[2 + j] >> 4, std::min(15, (j + 17) / 2)) << j;
  }
}

TEST(QuantsLegacy, KnownDotQ8_0) {
  // w = 0.5 * (j - 16), a = 0.25 * (j % 5 - 2): dot = 0.125 * sum (j - 16)(j % 5 - 2).
  std::vector<uint8_t> w(34), a(34);
  const uint16_t half_05 = 0x3800, half_025 = 0x3400;
  std::memcpy(w.data(), &half_05, 2);
  std::memcpy(a.data(), &half_025, 2);
  int expect = 0;
  for (int j = 0; j < 32; ++j) {
    w[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
    a[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j % 5 - 2));
    expect += (j - 16) * (j % 5 - 2);
  }
  ASSERT_NE(expect, 0);
  EXPECT_EQ(vec_dot_ref(DType::Q8_0, 32, w.data(), a.data()), 0.125f * static_cast<float>(expect));
  for (Isa isa : kIsas) {
    if (const TypeKernels* k = kernels_for_isa(DType::Q8_0, isa)) {
      EXPECT_EQ(k->vec_dot(32, w.data(), a.data()), 0.125f * static_cast<float>(expect)) << isa_name(isa);
    }
  }
}

// ---- quantizers ----

// Max |x - dequant(quant(x))| over a block, as a fraction of the block's max |x|. Worst cases:
// Q4_0 clips the side opposite the signed max by one step (amax / 8); Q5_0 likewise (amax / 16);
// the _1 types are off by half a step of (max - min) / levels <= 2 amax / levels; plus fp16 d.
double roundtrip_bound(DType t) {
  switch (t) {
    case DType::Q4_0: return 0.126;
    case DType::Q4_1: return 0.068;
    case DType::Q5_0: return 0.064;
    case DType::Q5_1: return 0.034;
    case DType::Q8_0:
    case DType::Q8_1: return 0.0045;
    case DType::F16: return 1.0 / 2048;
    case DType::BF16: return 1.0 / 256;
    default: return 0;
  }
}

TEST(QuantsLegacy, RoundTripWithinBound) {
  const int64_t n = 32 * 12;
  const auto x = random_row(n, 11);
  expect_spread(x);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::Q8_1}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const auto y = dequantize(t, quantize(t, x).data(), n);
    double worst = 0;
    for (int64_t b = 0; b < n; b += 32) {
      double amax = 0, err = 0;
      for (int64_t i = b; i < b + 32; ++i) {
        amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
        err = std::max(err, std::fabs(static_cast<double>(x[i]) - y[i]));
      }
      worst = std::max(worst, err / amax);
    }
    EXPECT_LE(worst, roundtrip_bound(t));
    if (t != DType::F32) {
      EXPECT_GT(worst, 0.0) << "lossy type reproduced its input exactly";
    }
  }
}

TEST(QuantsLegacy, ActivationQuantizersMatchRefBitForBit) {
  const int64_t n = 32 * 9;
  const auto x = random_row(n, 5);
  for (DType t : kWeightTypes) {
    const DType act = vec_dot_type(t);
    if (act == DType::F32) continue;
    const auto expect = quantize(act, x);
    for (Isa isa : kIsas) {
      const TypeKernels* k = kernels_for_isa(t, isa);
      if (!k) continue;
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + isa_name(isa));
      std::vector<uint8_t> got(expect.size(), 0xAB);
      k->quantize_act(x.data(), got.data(), n);
      EXPECT_EQ(got, expect);
    }
  }
  // The tie block rounds away from zero: 2.5 -> 3, -3.5 -> -4 (d = 1).
  const auto q = quantize(DType::Q8_0, x);
  EXPECT_EQ(static_cast<int8_t>(q[34 + 2 + 2]), 3);
  EXPECT_EQ(static_cast<int8_t>(q[34 + 2 + 3]), -4);
}

// ---- SIMD against ref ----

struct Case {
  DType t;
  const TypeKernels* k;
  std::string name;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (DType t : kWeightTypes)
    for (Isa isa : kIsas)
      if (const TypeKernels* k = kernels_for_isa(t, isa))
        cases.push_back({t, k, std::string(dtype_name(t)) + "/" + isa_name(isa)});
  return cases;
}

TEST(IsaLevels, NamesRoundTripAndDetectedMatchesCpuFeatures) {
  for (int i = 0; i < kIsaCount; ++i) EXPECT_EQ(parse_isa(isa_name(static_cast<Isa>(i))), static_cast<Isa>(i));
  EXPECT_STREQ(isa_name(Isa::Scalar), "ref");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  const auto& f = cpu_features();
  EXPECT_EQ(detected_isa(), f.avx512 ? Isa::Avx512 : f.avx2 ? Isa::Avx2 : Isa::Scalar);
  EXPECT_TRUE(isa_supported(Isa::Scalar));
}

TEST(QuantsLegacy, EveryIsaThisCpuRunsIsOffered) {
  const auto& f = cpu_features();
  for (DType t : kWeightTypes) {
    ASSERT_NE(kernels_for_isa(t, Isa::Scalar), nullptr);
    EXPECT_EQ(kernels_for_isa(t, Isa::Avx2) != nullptr, f.avx2);
    EXPECT_EQ(kernels_for_isa(t, Isa::Avx512) != nullptr, f.avx512);
    const TypeKernels& best = kernels_for(t);
    EXPECT_EQ(best.isa, detected_isa());
    EXPECT_EQ(best.type, t);
    EXPECT_EQ(best.act_type, vec_dot_type(t));
  }
  EXPECT_FALSE(parse_isa("sse9").has_value());
  EXPECT_ERROR(kernels_for(DType::I32), "kernels_for: type i32 is not supported");
  EXPECT_ERROR(vec_dot_type(DType::Q8_1), "vec_dot_type: type q8_1 is not supported");
  EXPECT_ERROR(dequantize_row_ref(DType::I16, nullptr, nullptr, 0), "dequantize: type i16 is not supported");
}

TEST(QuantsLegacy, DequantizeMatchesRefExactly) {
  for (int64_t n : {32, 32 * 7, 32 * 10 + 0}) {
    const auto x = random_row(n + 5, 21);  // float types also get a tail not a multiple of 8/16
    for (const Case& c : all_cases()) {
      const int64_t len = (c.t == DType::F32 || c.t == DType::F16 || c.t == DType::BF16) ? n + 5 : n;
      SCOPED_TRACE(c.name + " n=" + std::to_string(len));
      const std::vector<float> xs(x.begin(), x.begin() + len);
      const auto q = quantize(c.t, xs);
      const auto expect = dequantize(c.t, q.data(), len);
      std::vector<float> got(len, -7.f);
      c.k->dequantize(q.data(), got.data(), len);
      EXPECT_EQ(0, std::memcmp(got.data(), expect.data(), len * sizeof(float)));
    }
  }
}

TEST(QuantsLegacy, VecDotRefAgreesWithDequantizedDot) {
  const int64_t n = 32 * 8;
  const auto w = random_row(n, 31), a = random_row(n, 32);
  for (DType t : kWeightTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const DType at = vec_dot_type(t);
    const auto wq = quantize(t, w), aq = quantize(at, a);
    const auto wd = dequantize(t, wq.data(), n), ad = dequantize(at, aq.data(), n);
    double expect = 0;
    for (int64_t i = 0; i < n; ++i) expect += static_cast<double>(wd[i]) * ad[i];
    const double got = vec_dot_ref(t, n, wq.data(), aq.data());
    EXPECT_NEAR(got, expect, kDequantDotRelTol * abs_dot(wd, ad));
    EXPECT_GT(std::fabs(expect), 1e-3);
  }
}

TEST(QuantsLegacy, SimdDotsMatchRef) {
  // Odd block counts exercise the one-block tails; 4096 is a real model row.
  for (int64_t n : {32, 96, 32 * 10, 4096}) {
    constexpr int kRows = 15;  // an 8-row pass, a 4-row pass and a tail of 3
    std::vector<std::vector<float>> wf;
    for (int r = 0; r < kRows; ++r) wf.push_back(random_row(n, 100 + static_cast<uint32_t>(r * 7 + n)));
    const auto xf = random_row(n, 7 + static_cast<uint32_t>(n));
    expect_spread(xf);
    for (const Case& c : all_cases()) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      const DType at = c.k->act_type;
      const auto aq = quantize(at, xf);
      const auto ad = dequantize(at, aq.data(), n);
      // Rows need not be packed, but keep their element alignment (4: F32 rows hold floats).
      const size_t rb = row_bytes(c.t, n), stride = rb + 8;
      std::vector<uint8_t> w(stride * kRows, 0);
      std::vector<float> expect(kRows), tol(kRows);
      for (int r = 0; r < kRows; ++r) {
        const auto q = quantize(c.t, wf[r]);
        std::memcpy(w.data() + r * stride, q.data(), rb);
        expect[r] = vec_dot_ref(c.t, n, q.data(), aq.data());
        tol[r] = static_cast<float>(kDotRelTol * abs_dot(dequantize(c.t, q.data(), n), ad));
        EXPECT_NEAR(c.k->vec_dot(n, q.data(), aq.data()), expect[r], tol[r]) << "row " << r;
      }
      ASSERT_NE(expect[0], expect[1]) << "rows do not vary";
      for (int n_rows : {1, 2, 3, 4, 5, 8, 9, 12, kRows}) {
        std::vector<float> got(kRows + 1, 12345.f);
        c.k->rows_dot(n, n_rows, w.data(), stride, aq.data(), got.data());
        for (int r = 0; r < n_rows; ++r) EXPECT_NEAR(got[r], expect[r], tol[r]) << "rows " << n_rows << " row " << r;
        EXPECT_EQ(got[n_rows], 12345.f) << "wrote past n_rows";
      }
    }
  }
}

}  // namespace
}  // namespace weft::kernels
