// K-quant kernels: bit layout pinned by hand-built blocks, quantizer error bounds, the scalar dot
// against a double dot of dequantized values, and every SIMD level this CPU has against the ref.
#include "kernels/kquants.h"

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/kquants_impl.h"
#include "support/expect_error.h"
#include "support/gaussian_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace weft::kernels::kquants {
namespace {

// Relative RMS error of quantize -> dequantize on the Gaussian-with-outliers data below, per
// type. Measured with this quantizer: Q2_K 0.2955, Q3_K 0.1847, Q4_K 0.0869, Q5_K 0.0428, Q6_K 0.0244, Q8_K 0.0174
// (plain Gaussian: 0.072, 0.036, 0.018, 0.007, about what ggml's quantizers give); bounds leave ~15%.
constexpr double kMaxRelRmsQ2K = 0.340;
constexpr double kMaxRelRmsQ3K = 0.210;
constexpr double kMaxRelRmsQ4K = 0.100;
constexpr double kMaxRelRmsQ5K = 0.050;
constexpr double kMaxRelRmsQ6K = 0.028;
constexpr double kMaxRelRmsQ8K = 0.020;
// SIMD and ref dots sum the same exact int32 per-block sums; only the float accumulation of the
// per-block terms differs in order. Bound relative to sum |w_i a_i| of the dequantized values.
constexpr double kSimdDotRelTol = 2e-6;
// Ref dot (int sums, then float) vs double dot of dequantized floats (each rounded to float).
constexpr double kRefDotRelTol = 1e-5;
// End to end: quantized dot vs the f32 dot of the original data, relative to |w| |a|.
constexpr double kEndToEndRelTol = 0.03;

const DType kWeightTypes[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

const Isa kSimdIsas[] = {Isa::Avx2, Isa::Avx512};

using test_support::gaussian;

// Inputs must vary, or a kernel that ignores them could pass.
void expect_varied(const std::vector<float>& v) {
  std::set<float> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), v.size() / 2);
  double sum = 0, sum2 = 0;
  for (float x : v) {
    sum += x;
    sum2 += double(x) * x;
  }
  EXPECT_GT(sum2 / v.size() - (sum / v.size()) * (sum / v.size()), 0.1);
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_ref(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(n);
  dequantize_ref(t, q.data(), y.data(), n);
  return y;
}

double rel_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// sum |w_i a_i| and sum w_i a_i in double over dequantized rows.
std::pair<double, double> abs_and_dot(const std::vector<float>& w, const std::vector<float>& a) {
  double abs_sum = 0, dot = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    abs_sum += std::fabs(double(w[i]) * a[i]);
    dot += double(w[i]) * a[i];
  }
  return {abs_sum, dot};
}

// ---- bit layout, pinned by hand ----

// Scale bytes whose 6-bit unpacking (ggml's get_scale_min_k4) was worked out by hand:
// j < 4: sc = q[j] & 63, m = q[j+4] & 63;
// j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4.
constexpr uint8_t kScaleBytes[12] = {0xC1, 0x02, 0x03, 0x44, 0x05, 0x46, 0x07, 0x08, 0x9A, 0xBC, 0xDE, 0xF1};
constexpr uint8_t kExpectSc[8] = {1, 2, 3, 4, 58, 12, 14, 17};
constexpr uint8_t kExpectM[8] = {5, 6, 7, 8, 9, 27, 13, 15};

TEST(KQuants, ScaleMinUnpackingMatchesHandWorkedValues) {
  uint8_t sc[8], m[8];
  unpack_scales_mins(kScaleBytes, sc, m);
  uint64_t sc8, m8;
  unpack_scales_mins_x8(kScaleBytes, &sc8, &m8);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(sc[j], kExpectSc[j]) << j;
    EXPECT_EQ(m[j], kExpectM[j]) << j;
    EXPECT_EQ((sc8 >> (8 * j)) & 0xff, kExpectSc[j]) << j;
    EXPECT_EQ((m8 >> (8 * j)) & 0xff, kExpectM[j]) << j;
  }
}

TEST(KQuants, ScaleMinPackRoundTripsAndWordUnpackAgrees) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    uint8_t sc[8], m[8], packed[12], sc2[8], m2[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = rng() % 64;
      m[j] = rng() % 64;
    }
    pack_scales_mins(sc, m, packed);
    unpack_scales_mins(packed, sc2, m2);
    ASSERT_EQ(0, std::memcmp(sc, sc2, 8));
    ASSERT_EQ(0, std::memcmp(m, m2, 8));
    // Arbitrary bytes (not only packed ones): the word version must agree with the byte version.
    uint8_t raw[12];
    for (auto& b : raw) b = rng() & 0xff;
    uint64_t sc8, m8;
    unpack_scales_mins(raw, sc2, m2);
    unpack_scales_mins_x8(raw, &sc8, &m8);
    for (int j = 0; j < 8; ++j) {
      ASSERT_EQ((sc8 >> (8 * j)) & 0xff, sc2[j]);
      ASSERT_EQ((m8 >> (8 * j)) & 0xff, m2[j]);
    }
  }
}

TEST(KQuants, Q4KKnownValues) {
  BlockQ4K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kScaleBytes, 12);
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<uint8_t>(l);
  float y[256];
  dequantize_ref(DType::Q4_K, &b, y, 256);
  // x = d * sc * q - dmin * m. Value e: chunk c = e / 64 uses qs[32c .. 32c + 31], low nibbles
  // first (sub-block 2c), then high nibbles (sub-block 2c + 1).
  EXPECT_FLOAT_EQ(y[0], -2.5f);     // qs[0] = 0x00 lo 0, sc 1, m 5
  EXPECT_FLOAT_EQ(y[5], 2.5f);      // qs[5] lo 5: 5 - 2.5
  EXPECT_FLOAT_EQ(y[33], -3.0f);    // qs[1] hi 0, sub-block 1: m 6
  EXPECT_FLOAT_EQ(y[81], -0.5f);    // qs[49] = 0x31 lo 1, sub-block 2: 3 - 3.5
  EXPECT_FLOAT_EQ(y[113], 8.0f);    // qs[49] hi 3, sub-block 3: 12 - 4
  EXPECT_FLOAT_EQ(y[138], 575.5f);  // qs[74] = 0x4A lo 10, sub-block 4: 580 - 4.5
  EXPECT_FLOAT_EQ(y[161], 34.5f);   // qs[65] = 0x41 hi 4, sub-block 5: 48 - 13.5
  EXPECT_FLOAT_EQ(y[195], 35.5f);   // qs[99] = 0x63 lo 3, sub-block 6: 42 - 6.5
  EXPECT_FLOAT_EQ(y[255], 111.5f);  // qs[127] = 0x7F hi 7, sub-block 7: 119 - 7.5
  for (int e = 0; e < 256; ++e) {
    const int c = e / 64, w = e % 64, j = e / 32;
    const uint8_t byte = b.qs[32 * c + w % 32];
    const int q = w < 32 ? byte & 15 : byte >> 4;
    EXPECT_FLOAT_EQ(y[e], 1.0f * kExpectSc[j] * q - 0.5f * kExpectM[j]) << e;
  }
}

TEST(KQuants, Q5KKnownValues) {
  BlockQ5K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kScaleBytes, 12);
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<uint8_t>(l);
  b.qh[5] = 0x01;   // bit 0: chunk 0 low nibbles -> value 5
  b.qh[17] = 0x08;  // bit 3: chunk 1 high nibbles -> value 64 + 32 + 17 = 113
  b.qh[31] = 0x80;  // bit 7: chunk 3 high nibbles -> value 255
  float y[256];
  dequantize_ref(DType::Q5_K, &b, y, 256);
  EXPECT_FLOAT_EQ(y[0], -2.5f);
  EXPECT_FLOAT_EQ(y[5], 18.5f);     // q = 5 + 16
  EXPECT_FLOAT_EQ(y[37], -3.0f);    // qs[5] hi 0, qh[5] bit 1 clear
  EXPECT_FLOAT_EQ(y[69], 11.5f);    // qs[37] = 0x25 lo 5, qh[5] bit 2 clear: 15 - 3.5
  EXPECT_FLOAT_EQ(y[81], -0.5f);    // qh[17] bit 2 clear
  EXPECT_FLOAT_EQ(y[113], 72.0f);   // q = 3 + 16: 4 * 19 - 4
  EXPECT_FLOAT_EQ(y[255], 383.5f);  // q = 7 + 16: 17 * 23 - 7.5
}

TEST(KQuants, Q6KKnownValues) {
  BlockQ6K b{};
  b.d = 0x3800;  // 0.5
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16};
  std::memcpy(b.scales, scales, 16);
  for (int l = 0; l < 128; ++l) b.ql[l] = static_cast<uint8_t>(l);
  b.qh[3] = 0xE4;        // parts 0..3 of l = 3 in half 0 get top bits 0, 1, 2, 3
  b.qh[32 + 20] = 0x03;  // part 0 of l = 20 in half 1 gets top bits 3
  float y[256];
  dequantize_ref(DType::Q6_K, &b, y, 256);
  // x = d * sc * (q - 32).
  EXPECT_FLOAT_EQ(y[0], -16.0f);    // q 0, sc[0] 1
  EXPECT_FLOAT_EQ(y[3], -14.5f);    // ql[3] lo 3: q 3, sc[0]
  EXPECT_FLOAT_EQ(y[35], -19.5f);   // ql[35] = 0x23 lo 3 + 16: q 19, sc[2] 3
  EXPECT_FLOAT_EQ(y[67], 0.0f);     // ql[3] hi 0 + 32: q 32, sc[4]
  EXPECT_FLOAT_EQ(y[99], 63.0f);    // ql[35] hi 2 + 48: q 50, sc[6] 7
  EXPECT_FLOAT_EQ(y[148], -100.f);  // ql[84] = 0x54 lo 4 + 48: q 52, sc[9] -10
  EXPECT_FLOAT_EQ(y[212], 189.f);   // ql[84] hi 5: q 5, sc[13] -14
  EXPECT_FLOAT_EQ(y[255], 200.f);   // ql[127] hi 7: q 7, sc[15] -16
}

// Q3_K scale bytes unpacked by hand with ggml's rule (dequantize_block_q3_K): scale j < 8 has its
// low 4 bits in the low nibble of byte j, j >= 8 in the high nibble of byte j - 8; its top 2 bits
// are bits 2 (j / 4) of byte 8 + j % 4; stored + 32.
constexpr uint8_t kQ3ScaleBytes[12] = {0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB, 0xED, 0x0F, 0xE4, 0x1B, 0x00, 0xFF};
constexpr int8_t kQ3ExpectSc[16] = {-31, 19, -27, 23, -7, 11, -19, 31, 2, -12, -26, 24, 26, -20, -18, 16};

TEST(KQuants, Q3KScaleUnpackingMatchesHandWorkedValuesAndPackRoundTrips) {
  int8_t sc[16];
  unpack_q3_scales(kQ3ScaleBytes, sc);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(sc[j], kQ3ExpectSc[j]) << j;
  uint8_t packed[12];
  pack_q3_scales(kQ3ExpectSc, packed);
  EXPECT_EQ(0, std::memcmp(packed, kQ3ScaleBytes, 12));
  std::mt19937 rng(9);
  for (int trial = 0; trial < 1000; ++trial) {
    int8_t in[16], out[16];
    for (auto& v : in) v = static_cast<int8_t>(static_cast<int>(rng() % 64) - 32);
    pack_q3_scales(in, packed);
    unpack_q3_scales(packed, out);
    ASSERT_EQ(0, std::memcmp(in, out, 16));
  }
}

TEST(KQuants, Q3KKnownValues) {
  BlockQ3K b{};
  b.d = 0x3C00;  // 1.0
  std::memcpy(b.scales, kQ3ScaleBytes, 12);
  for (int l = 0; l < 64; ++l) b.qs[l] = static_cast<uint8_t>(l);
  std::memset(b.hmask, 0x55, 32);  // bit 4h + p set for p = 0, 2: those values keep their level
  float y[256];
  dequantize_ref(DType::Q3_K, &b, y, 256);
  // x = d * sc[e / 16] * (q2 - (bit ? 0 : 4)), q2 = bits 2p.. of qs[32h + l], e = 128h + 32p + l.
  EXPECT_FLOAT_EQ(y[5], -31.0f);    // qs[5] p 0: 1, bit set; sc -31
  EXPECT_FLOAT_EQ(y[33], 108.0f);   // qs[1] p 1: 0, bit clear: -4; sc[2] -27
  EXPECT_FLOAT_EQ(y[95], 11.0f);    // qs[31] p 2: 1, bit set; sc[5] 11
  EXPECT_FLOAT_EQ(y[127], -124.f);  // qs[31] p 3: 0, clear: -4; sc[7] 31
  EXPECT_FLOAT_EQ(y[130], 4.0f);    // qs[34] p 0: 2, bit 4 set; sc[8] 2
  EXPECT_FLOAT_EQ(y[180], -72.0f);  // qs[52] p 1: 1, bit 5 clear: -3; sc[11] 24
  EXPECT_FLOAT_EQ(y[200], 52.0f);   // qs[40] p 2: 2, bit 6 set; sc[12] 26
  EXPECT_FLOAT_EQ(y[230], 72.0f);   // qs[38] p 3: 0, bit 7 clear: -4; sc[14] -18
  EXPECT_FLOAT_EQ(y[255], -64.0f);  // qs[63] p 3: 0, clear: -4; sc[15] 16
}

TEST(KQuants, Q2KKnownValues) {
  BlockQ2K b{};
  b.d = 0x3C00;                                                                                     // 1.0
  b.dmin = 0x3800;                                                                                  // 0.5
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>((j % 15 + 1) | ((15 - j) << 4));  // m 15 - j
  for (int l = 0; l < 64; ++l) b.qs[l] = static_cast<uint8_t>(l * 7);
  float y[256];
  dequantize_ref(DType::Q2_K, &b, y, 256);
  // x = d * sc[j] * q - dmin * m[j], j = e / 16, q = bits 2p.. of qs[32h + l], e = 128h + 32p + l.
  EXPECT_FLOAT_EQ(y[0], -7.5f);    // q 0, m 15
  EXPECT_FLOAT_EQ(y[17], -1.0f);   // qs[17] = 119 p 0: 3; 2 * 3 - 7
  EXPECT_FLOAT_EQ(y[45], -0.5f);   // qs[13] = 91 p 1: 2; 3 * 2 - 6.5
  EXPECT_FLOAT_EQ(y[100], -4.5f);  // qs[4] = 28 p 3: 0; - 4.5
  EXPECT_FLOAT_EQ(y[150], 17.0f);  // qs[54] = 122 p 0: 2; 10 * 2 - 3
  EXPECT_FLOAT_EQ(y[200], 11.5f);  // qs[40] = 24 p 2: 1; 13 - 1.5
  EXPECT_FLOAT_EQ(y[255], 2.0f);   // qs[63] = 185 p 3: 2; 1 * 2 - 0
}

TEST(KQuants, Q8KKnownValues) {
  BlockQ8K b{};
  b.d = 0.25f;
  for (int e = 0; e < 256; ++e) b.qs[e] = static_cast<int8_t>(e % 255 - 127);
  float y[256];
  dequantize_ref(DType::Q8_K, &b, y, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * (e % 255 - 127)) << e;
}

// ---- quantizers ----

TEST(KQuants, QuantizeDequantizeErrorBounds) {
  const int64_t n = 256 * 16;
  const auto x = gaussian(n, 1);
  expect_varied(x);
  const std::pair<DType, double> cases[] = {{DType::Q2_K, kMaxRelRmsQ2K}, {DType::Q3_K, kMaxRelRmsQ3K},
                                            {DType::Q4_K, kMaxRelRmsQ4K}, {DType::Q5_K, kMaxRelRmsQ5K},
                                            {DType::Q6_K, kMaxRelRmsQ6K}, {DType::Q8_K, kMaxRelRmsQ8K}};
  double prev = 1.0;
  for (auto [t, bound] : cases) {
    const double err = rel_rms_error(x, dequantize(t, quantize(t, x), n));
    EXPECT_LT(err, bound) << dtype_name(t);
    EXPECT_LT(err, prev) << dtype_name(t) << " should beat the type with fewer bits";
    prev = err;
  }
}

// Relative RMS bound of the edge-case blocks below. Q2_K's mins only lower values and it has 4
// levels, so a block of 10 .. 15 keeps about 1 / 6 of its spread as error (ggml's format alike);
// Q3_K has 8 symmetric levels.
double edge_bound(DType t) { return t == DType::Q2_K ? 0.25 : t == DType::Q3_K ? 0.15 : 0.1; }

TEST(KQuants, QuantizeEdgeCasesStayValid) {
  // Zero, constant, all-negative, all-positive with offset and tiny-magnitude blocks.
  std::vector<float> x(256 * 5);
  for (int e = 0; e < 256; ++e) {
    x[e] = 0.0f;
    x[256 + e] = 3.0f;
    x[512 + e] = -1.0f - 0.01f * e;
    x[768 + e] = 10.0f + 0.02f * e;
    x[1024 + e] = 1e-3f * std::sin(0.3f * e);
  }
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    const auto y = dequantize(t, quantize(t, x), static_cast<int64_t>(x.size()));
    for (int b = 0; b < 5; ++b) {
      double err = 0, ref = 0;
      for (int e = 256 * b; e < 256 * b + 256; ++e) {
        ASSERT_TRUE(std::isfinite(y[e])) << dtype_name(t) << " " << e;
        err += (double(x[e]) - y[e]) * (double(x[e]) - y[e]);
        ref += double(x[e]) * x[e];
      }
      if (b == 0)
        EXPECT_EQ(err, 0.0) << dtype_name(t);
      else
        EXPECT_LT(std::sqrt(err / ref), edge_bound(t)) << dtype_name(t) << " block " << b;
    }
  }
}

// ---- dot products ----

TEST(KQuants, RefDotMatchesDoubleDotOfDequantized) {
  const int64_t n = 256 * 12;
  const auto w = gaussian(n, 2), a = gaussian(n, 3);
  expect_varied(w);
  expect_varied(a);
  const auto qa = quantize(DType::Q8_K, a);
  const auto da = dequantize(DType::Q8_K, qa, n);
  double f32_dot = 0, w_norm = 0, a_norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    f32_dot += double(w[i]) * a[i];
    w_norm += double(w[i]) * w[i];
    a_norm += double(a[i]) * a[i];
  }
  for (DType t : kWeightTypes) {
    const auto qw = quantize(t, w);
    const auto [abs_sum, expect] = abs_and_dot(dequantize(t, qw, n), da);
    const float got = vec_dot_ref(t, n, qw.data(), qa.data());
    EXPECT_NEAR(got, expect, kRefDotRelTol * abs_sum) << dtype_name(t);
    EXPECT_NEAR(got, f32_dot, kEndToEndRelTol * std::sqrt(w_norm * a_norm)) << dtype_name(t);
  }
}

TEST(KQuants, FindContract) {
  EXPECT_TRUE(handles(DType::Q4_K) && handles(DType::Q5_K) && handles(DType::Q6_K) && handles(DType::Q8_K));
  EXPECT_TRUE(handles(DType::Q2_K) && handles(DType::Q3_K));
  EXPECT_FALSE(handles(DType::Q4_0) || handles(DType::F32) || handles(DType::Q8_0));
  EXPECT_EQ(find_type(table<Isa::Scalar>(), DType::Q4_0), nullptr);
  EXPECT_ERROR(dequantize_ref(DType::Q8_0, nullptr, nullptr, 0), "is not a K-quant");
  EXPECT_ERROR(vec_dot_ref(DType::Q8_K, 0, nullptr, nullptr), "no dot product with");
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    for (DType t : kWeightTypes) {
      const TypeKernels* k = kernels_for_isa(t, isa);
      if (!k) continue;
      EXPECT_EQ(k->type, t);
      EXPECT_EQ(k->act_type, DType::Q8_K);
      EXPECT_EQ(k->isa, isa);
      EXPECT_TRUE(k->dequantize && k->quantize_act && k->vec_dot && k->rows_dot);
    }
    if (const TypeKernels* k = kernels_for_isa(DType::Q8_K, isa)) {
      EXPECT_TRUE(k->dequantize && k->quantize_act);
      EXPECT_EQ(k->vec_dot, nullptr);
    }
  }
  ASSERT_NE(kernels_for_isa(DType::Q4_K, Isa::Scalar), nullptr);
  // Every level this CPU runs has Q2_K and Q3_K (the AVX-512 entries run the AVX2 passes).
  for (DType t : {DType::Q2_K, DType::Q3_K})
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      if (isa_supported(isa)) {
        EXPECT_NE(kernels_for_isa(t, isa), nullptr) << isa_name(isa);
      }
}

class KQuantsSimd : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!kernels_for_isa(DType::Q8_K, GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not supported on this CPU";
  }
  // The level's kernels of t.
  static const TypeKernels& level(DType t) {
    const TypeKernels* k = kernels_for_isa(t, GetParam());
    WEFT_ASSERT(k);
    return *k;
  }
};

TEST_P(KQuantsSimd, QuantizeActIsBitIdenticalToRef) {
  const int64_t n = 256 * 8;
  auto x = gaussian(n, 4, 3.0f);
  for (int e = 256; e < 512; ++e) x[e] = 0.0f;            // an all-zero block
  for (int e = 512; e < 768; ++e) x[e] = (e % 3) - 1.0f;  // lands exactly on -127, 0, 127
  expect_varied(x);
  const auto expect = quantize(DType::Q8_K, x);
  for (DType t : {DType::Q8_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const TypeKernels* k = kernels_for_isa(t, GetParam());
    ASSERT_NE(k, nullptr);
    std::vector<uint8_t> got(expect.size(), 0xcd);
    k->quantize_act(x.data(), got.data(), n);
    EXPECT_EQ(0, std::memcmp(got.data(), expect.data(), got.size())) << dtype_name(t);
  }
}

TEST_P(KQuantsSimd, DequantizeMatchesRef) {
  const int64_t n = 256 * 4;
  const auto x = gaussian(n, 5);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    const auto q = quantize(t, x);
    const auto expect = dequantize(t, q, n);
    std::vector<float> got(n);
    level(t).dequantize(q.data(), got.data(), n);
    EXPECT_EQ(0, std::memcmp(got.data(), expect.data(), n * sizeof(float))) << dtype_name(t);
  }
}

TEST_P(KQuantsSimd, VecDotMatchesRef) {
  for (int64_t n : {256, 256 * 3, 256 * 16}) {
    const auto w = gaussian(n, 6 + static_cast<uint32_t>(n)), a = gaussian(n, 7);
    const auto qa = quantize(DType::Q8_K, a);
    const auto da = dequantize(DType::Q8_K, qa, n);
    for (DType t : kWeightTypes) {
      const auto qw = quantize(t, w);
      const double abs_sum = abs_and_dot(dequantize(t, qw, n), da).first;
      const float expect = vec_dot_ref(t, n, qw.data(), qa.data());
      const float got = level(t).vec_dot(n, qw.data(), qa.data());
      EXPECT_NEAR(got, expect, kSimdDotRelTol * abs_sum) << dtype_name(t) << " n=" << n;
    }
  }
}

// Random bytes reach every level and scale (q8 of -127 and 127, scale bytes 63, Q6_K scale -128),
// which a quantizer's output might not.
TEST_P(KQuantsSimd, VecDotMatchesRefOnRandomBlocks) {
  const int64_t n = 256 * 6;
  std::mt19937 rng(11);
  std::vector<uint8_t> a(row_bytes(DType::Q8_K, n));
  auto* y = reinterpret_cast<BlockQ8K*>(a.data());
  for (int64_t i = 0; i < n / 256; ++i) {
    y[i].d = 0.01f * (1 + i);
    for (int e = 0; e < 256; ++e) y[i].qs[e] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    y[i].qs[0] = -127;
    y[i].qs[1] = 127;
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(s);
    }
  }
  for (DType t : kWeightTypes) {
    std::vector<uint8_t> w(row_bytes(t, n));
    for (auto& b : w) b = rng() & 0xff;
    // Sane fp16 super-scales (random bits could be inf/NaN).
    for (int64_t i = 0; i < n / 256; ++i) {
      uint8_t* blk = w.data() + i * traits(t).block_bytes;
      const uint16_t d = f32_to_fp16(0.001f * (i + 1)), dmin = f32_to_fp16(0.002f);
      if (t == DType::Q6_K) {
        std::memcpy(blk + 208, &d, 2);
        blk[192] = 0x80;  // scale -128
      } else if (t == DType::Q3_K) {
        std::memcpy(blk + 108, &d, 2);
      } else if (t == DType::Q2_K) {
        std::memcpy(blk + 80, &d, 2);
        std::memcpy(blk + 82, &dmin, 2);
      } else {
        std::memcpy(blk, &d, 2);
        std::memcpy(blk + 2, &dmin, 2);
      }
    }
    const auto dw = dequantize(t, w, n);
    const auto da = dequantize(DType::Q8_K, a, n);
    const auto [abs_sum, exact] = abs_and_dot(dw, da);
    const float expect = vec_dot_ref(t, n, w.data(), a.data());
    EXPECT_NEAR(expect, exact, kRefDotRelTol * abs_sum) << dtype_name(t);
    const float got = level(t).vec_dot(n, w.data(), a.data());
    EXPECT_NEAR(got, expect, kSimdDotRelTol * abs_sum) << dtype_name(t);
  }
}

// Every row count from 1 to 9 covers full groups of 2 and 4 and every leftover; the stride has
// padding so a kernel that assumed packed rows would read the wrong bytes.
TEST_P(KQuantsSimd, RowsDotMatchesRefPerRow) {
  const int64_t n = 256 * 4;
  const int max_rows = 9;
  const auto a = gaussian(n, 8);
  const auto qa = quantize(DType::Q8_K, a);
  for (DType t : kWeightTypes) {
    const size_t stride = row_bytes(t, n) + 64;
    std::vector<uint8_t> rows(stride * max_rows, 0xee);
    for (int r = 0; r < max_rows; ++r) {
      const auto q = quantize(t, gaussian(n, 100 + r, 1.0f + 0.3f * r));
      std::memcpy(rows.data() + r * stride, q.data(), q.size());
    }
    for (int n_rows = 1; n_rows <= max_rows; ++n_rows) {
      std::vector<float> got(n_rows + 1, -7.0f);
      level(t).rows_dot(n, n_rows, rows.data(), stride, qa.data(), got.data());
      EXPECT_EQ(got[n_rows], -7.0f) << "wrote past n_rows";
      std::set<float> distinct;
      for (int r = 0; r < n_rows; ++r) {
        const uint8_t* row = rows.data() + r * stride;
        const float expect = vec_dot_ref(t, n, row, qa.data());
        const double abs_sum = abs_and_dot(dequantize(t, std::vector<uint8_t>(row, row + row_bytes(t, n)), n),
                                           dequantize(DType::Q8_K, qa, n))
                                   .first;
        EXPECT_NEAR(got[r], expect, kSimdDotRelTol * abs_sum) << dtype_name(t) << " row " << r << "/" << n_rows;
        distinct.insert(got[r]);
      }
      EXPECT_EQ(distinct.size(), static_cast<size_t>(n_rows)) << "rows should differ";
    }
  }
}

// A row-parallel split gives each device whole blocks of every row (a column slice): the dots of
// the slices, each with its own part of the activations quantized on its own, add up to the
// whole row's dot (the same blocks, the same Q8_K scales), up to the order of the float sums.
TEST_P(KQuantsSimd, ColumnSlicesAddUpToTheWholeRow) {
  const int64_t n = 256 * 4, rows = 5;
  const auto a = gaussian(n, 12);
  for (DType t : kWeightTypes) {
    const size_t stride = row_bytes(t, n);
    std::vector<uint8_t> w(stride * rows);
    for (int r = 0; r < rows; ++r) {
      const auto q = quantize(t, gaussian(n, 200 + r));
      std::memcpy(w.data() + r * stride, q.data(), q.size());
    }
    const TypeKernels& k = level(t);
    std::vector<uint8_t> qa(row_bytes(DType::Q8_K, n));
    k.quantize_act(a.data(), qa.data(), n);
    std::vector<float> whole(rows), sum(rows, 0.0f), part(rows);
    k.rows_dot(n, rows, w.data(), stride, qa.data(), whole.data());
    for (int64_t c0 : {0, 256, 768}) {  // slices [0, 256), [256, 768), [768, 1024)
      const int64_t c1 = c0 == 0 ? 256 : c0 == 256 ? 768 : n, len = c1 - c0;
      std::vector<uint8_t> qs(row_bytes(DType::Q8_K, len));
      k.quantize_act(a.data() + c0, qs.data(), len);
      k.rows_dot(len, rows, w.data() + row_bytes(t, c0), stride, qs.data(), part.data());
      for (int r = 0; r < rows; ++r) sum[r] += part[r];
    }
    for (int r = 0; r < rows; ++r)
      EXPECT_NEAR(sum[r], whole[r], 1e-4 * (std::fabs(whole[r]) + 1)) << dtype_name(t) << " row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KQuantsSimd, ::testing::ValuesIn(kSimdIsas),
                         [](const auto& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace weft::kernels::kquants
