// IQ4_NL / IQ4_XS / MXFP4 kernels: the bit layout pinned by hand-built blocks (MXFP4's every exponent
// against a decode written from the OCP spec), quantizer error bounds, the scalar dot against a
// double dot of dequantized values, and every SIMD level this CPU has against the ref (single rows,
// passes of rows with padded strides, random blocks that reach every level, MXFP4's edge exponents).
#include "kernels/iquants.h"

#include "core/fp16.h"
#include "kernels/iquants_impl.h"
#include "kernels/kquants_impl.h"
#include "kernels/quants_legacy.h"
#include "support/gaussian_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace weft::kernels::iquants {
namespace {

// Relative RMS error of quantize -> dequantize on the Gaussian-with-outliers rows below. Measured
// with this quantizer: IQ4_NL 0.1002, IQ4_XS 0.1016 (kquants_test's Q4_K: 0.0869 on the same data);
// the bounds leave ~10%. MXFP4 measured 0.1404: a power-of-two scale from the block's largest value
// (ggml's rule), E2M1's levels.
constexpr double kMaxRelRmsNl = 0.110;
constexpr double kMaxRelRmsXs = 0.112;
constexpr double kMaxRelRmsMx = 0.155;
// SIMD and ref dots sum the same exact int32 block sums; only the float accumulation differs.
constexpr double kSimdDotRelTol = 2e-6;
// Ref dot (int sums, then float) vs a double dot of the dequantized floats.
constexpr double kRefDotRelTol = 1e-5;

const DType kTypes[] = {DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

using legacy::BlockQ8_0;
using test_support::gaussian;

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row_ref(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const uint8_t* q, int64_t n) {
  std::vector<float> y(n);
  dequantize_row_ref(t, q, y.data(), n);
  return y;
}

double abs_dot(const std::vector<float>& w, const std::vector<float>& a, double* dot = nullptr) {
  double s = 0, d = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    s += std::fabs(double(w[i]) * a[i]);
    d += double(w[i]) * a[i];
  }
  if (dot) *dot = d;
  return s;
}

TEST(IQuants, GgufTypeIdsAndSizes) {
  const auto nl = dtype_traits(20), xs = dtype_traits(23), mx = dtype_traits(39);
  ASSERT_TRUE(nl && xs && mx);
  EXPECT_EQ(nl->name, "iq4_nl");
  EXPECT_EQ(nl->block_size, 32);
  EXPECT_EQ(nl->block_bytes, 18u);
  EXPECT_EQ(xs->name, "iq4_xs");
  EXPECT_EQ(xs->block_size, 256);
  EXPECT_EQ(xs->block_bytes, 136u);
  EXPECT_EQ(mx->name, "mxfp4");
  EXPECT_EQ(mx->block_size, 32);
  EXPECT_EQ(mx->block_bytes, 17u);
  EXPECT_TRUE(nl->supported && xs->supported && mx->supported);
  EXPECT_EQ(vec_dot_type(DType::IQ4_NL), DType::Q8_0);
  EXPECT_EQ(vec_dot_type(DType::IQ4_XS), DType::Q8_K);
  EXPECT_EQ(vec_dot_type(DType::MXFP4), DType::Q8_0);
}

// ggml's dequantize_row_iq4_nl: value j = d * grid[qs[j] & 15], value j + 16 = d * grid[qs[j] >> 4].
TEST(IQuants, NlKnownValues) {
  BlockIQ4NL b{};
  b.d = f32_to_fp16(0.5f);
  b.qs[0] = 0x1F;  // value 0: grid[15] = 113, value 16: grid[1] = -104
  b.qs[5] = 0x80;  // value 5: grid[0] = -127, value 21: grid[8] = 1
  std::vector<float> y(32);
  dequantize_row_ref(DType::IQ4_NL, &b, y.data(), 32);
  EXPECT_EQ(y[0], 56.5f);
  EXPECT_EQ(y[16], -52.f);
  EXPECT_EQ(y[5], -63.5f);
  EXPECT_EQ(y[21], 0.5f);
  EXPECT_EQ(y[1], -63.5f);  // qs[1] = 0: grid[0] for both
  EXPECT_EQ(y[17], -63.5f);
}

// ggml's dequantize_row_iq4_xs: ls = (scales_l[ib / 2] >> 4 (ib % 2) & 15) | (scales_h >> 2 ib & 3) << 4,
// sub-block ib's values d * (ls - 32) * grid[nibble], paired as IQ4_NL's within its 16 bytes.
TEST(IQuants, XsKnownValues) {
  BlockIQ4XS b{};
  b.d = f32_to_fp16(1.0f);
  b.scales_l[0] = 0x21;     // ib 0: low bits 1, ib 1: low bits 2
  b.scales_h = 2 | 1 << 2;  // ib 0: top bits 2 (ls 33, scale 1), ib 1: top bits 1 (ls 18, scale -14)
  b.qs[0] = 0x80;           // ib 0 value 0: grid[0] = -127, value 16: grid[8] = 1
  b.qs[16] = 0x0F;          // ib 1 value 0 (32): grid[15] = 113, value 16 (48): grid[0] = -127
  std::vector<float> y(256);
  dequantize_row_ref(DType::IQ4_XS, &b, y.data(), 256);
  EXPECT_EQ(iq4xs_scale(b, 0), 33);
  EXPECT_EQ(iq4xs_scale(b, 1), 18);
  EXPECT_EQ(iq4xs_scale(b, 2), 0);  // scale -32
  EXPECT_EQ(y[0], -127.f);
  EXPECT_EQ(y[16], 1.f);
  EXPECT_EQ(y[32], -1582.f);
  EXPECT_EQ(y[48], 1778.f);
  EXPECT_EQ(y[64], -32.f * -127.f);  // ib 2: nibbles 0, scale -32
}

// An MXFP4 value from the OCP Microscaling spec (v1.0), not from ggml's tables: nibble = E2M1 (bit
// 3 the sign, bits 2..1 the exponent of bias 1, bit 0 the mantissa; exponent 0 is subnormal, 0.5 x
// mantissa) times the block's E8M0 scale 2^(e - 127). The spec makes e = 255 NaN; ggml reads it as
// 2^128, and so does weft.
double mxfp4_value(int nibble, int e) {
  const int exp = (nibble >> 1) & 3, man = nibble & 1;
  const double e2m1 = exp == 0 ? 0.5 * man : std::ldexp(1.0 + 0.5 * man, exp - 1);
  return (nibble & 8 ? -e2m1 : e2m1) * std::ldexp(1.0, e - 127);
}
// The float a double rounds to; past float's range, the infinity that a float product gives.
float to_float(double v) {
  if (std::fabs(v) > std::numeric_limits<float>::max()) return v < 0 ? -INFINITY : INFINITY;
  return static_cast<float>(v);
}

// ggml's dequantize_row_mxfp4 for every exponent, the subnormal scales (e = 0, 1) and those whose
// largest levels overflow float (e = 254, 255) included: every nibble in both halves of the block.
TEST(IQuants, MxDequantizeMatchesSpecAtEveryExponent) {
  BlockMXFP4 b{};
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> y(32);
  for (int e = 0; e < 256; ++e) {
    b.e = static_cast<uint8_t>(e);
    dequantize_row_ref(DType::MXFP4, &b, y.data(), 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], to_float(mxfp4_value(j, e))) << "e " << e << " value " << j;
      EXPECT_EQ(y[j + 16], to_float(mxfp4_value(15 - j, e))) << "e " << e << " value " << j + 16;
    }
  }
  EXPECT_EQ(e8m0_half(0), std::ldexp(1.f, -128));  // the subnormals, exactly
  EXPECT_EQ(e8m0_half(1), std::ldexp(1.f, -127));
  EXPECT_EQ(e8m0_half(255), std::ldexp(1.f, 127));
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, each value the nearest level (a
// tie to the lower nibble: zero is nibble 0, never 8).
TEST(IQuants, MxQuantizerPicksGgmlsExponent) {
  struct Case {
    float amax;
    int e;
  };
  for (const Case c :
       {Case{1.f, 125}, Case{1.5f, 125}, Case{1.99f, 125}, Case{2.f, 126}, Case{0.3f, 123}, Case{1e30f, 224},
        Case{std::numeric_limits<float>::max(), 252}, Case{std::ldexp(1.f, -120), 5}, Case{1e-44f, 0}}) {
    std::vector<float> x(32, 0.f);
    x[3] = -c.amax;
    x[20] = c.amax / 3;
    const auto q = quantize(DType::MXFP4, x);
    const auto& b = *reinterpret_cast<const BlockMXFP4*>(q.data());
    EXPECT_EQ(b.e, c.e) << "amax " << c.amax;
    EXPECT_EQ(b.qs[0], 0) << "zeros are nibble 0";
    if (c.e == 0) continue;  // amax below 2^-125: every value rounds to zero
    const auto y = dequantize(DType::MXFP4, q.data(), 32);
    // amax lands on 8 .. 16 d (d = 2^(e - 128)) and takes the nearest of 8 d, 12 d (clipped there).
    const float d = std::ldexp(1.f, c.e - 128);
    EXPECT_EQ(y[3], c.amax >= 10 * d ? -12 * d : -8 * d) << "amax " << c.amax;
  }
  // An infinite value: the largest exponent, not an overflow of ilogb's INT_MAX.
  std::vector<float> inf(32, 1.f);
  inf[5] = INFINITY;
  EXPECT_EQ(reinterpret_cast<const BlockMXFP4*>(quantize(DType::MXFP4, inf).data())->e, 255);
  // Midway between two levels (1 and 1.5 at d = 0.125: 8 d and 12 d), the lower nibble: 8 d.
  std::vector<float> x(32, 0.f);
  x[0] = 1.25f;
  x[1] = -1.25f;
  x[2] = 1.5f;
  const auto y = dequantize(DType::MXFP4, quantize(DType::MXFP4, x).data(), 32);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -1.f);
}

TEST(IQuants, QuantizeDequantizeErrorBounds) {
  const int64_t n = 256 * 16;
  const auto x = gaussian(n, 1);
  struct Case {
    DType t;
    double bound;
    size_t scale_bytes;  // before a block's nibbles
    size_t nibbles;      // the grid indices the quantizer uses: MXFP4's -0 (nibble 8) never
  };
  for (auto [t, bound, head, n_nibbles] :
       {Case{DType::IQ4_NL, kMaxRelRmsNl, 2, 16}, Case{DType::IQ4_XS, kMaxRelRmsXs, 8, 16},
        Case{DType::MXFP4, kMaxRelRmsMx, 1, 15}}) {
    const auto q = quantize(t, x);
    const auto y = dequantize(t, q.data(), n);
    double err = 0, ref = 0;
    std::set<int> nibbles;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      ref += double(x[i]) * x[i];
    }
    EXPECT_LT(std::sqrt(err / ref), bound) << dtype_name(t);
    // The quantizer uses the whole grid (an off-by-one in the level search would skip an end).
    const uint8_t* qs = q.data() + head;
    const size_t step = traits(t).block_bytes, bytes = step - head;
    for (size_t b = 0; b < q.size() / step; ++b)
      for (size_t j = 0; j < bytes; ++j) nibbles.insert(qs[b * step + j] & 15), nibbles.insert(qs[b * step + j] >> 4);
    EXPECT_EQ(nibbles.size(), n_nibbles) << dtype_name(t);
  }
  // A zero row stays zero.
  std::vector<float> zero(256, 0.f);
  for (DType t : kTypes)
    for (float v : dequantize(t, quantize(t, zero).data(), 256)) EXPECT_EQ(v, 0.f) << dtype_name(t);
}

TEST(IQuants, RefDotMatchesDoubleDotOfDequantized) {
  const int64_t n = 256 * 8;
  const auto w = gaussian(n, 2), a = gaussian(n, 3);
  for (DType t : kTypes) {
    const auto qw = quantize(t, w), qa = quantize(vec_dot_type(t), a);
    double exact = 0;
    const double abs_sum = abs_dot(dequantize(t, qw.data(), n), dequantize(vec_dot_type(t), qa.data(), n), &exact);
    EXPECT_NEAR(vec_dot_ref(t, n, qw.data(), qa.data()), exact, kRefDotRelTol * abs_sum) << dtype_name(t);
    EXPECT_GT(std::fabs(exact), 1.0) << "a dot of zero would hide a wrong sign";
  }
}

class IQuantsSimd : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not supported on this CPU";
  }
  static const TypeKernels& level(DType t) {
    const TypeKernels* k = kernels_for_isa(t, GetParam());
    EXPECT_TRUE(k);
    return *k;
  }
};

// Random weight bytes reach every nibble and scale (ls 0 .. 63); activations reach -127 and 127.
std::vector<uint8_t> random_row(DType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> w(row_bytes(t, n));
  for (auto& b : w) b = rng() & 0xff;
  const size_t step = traits(t).block_bytes;
  for (size_t i = 0; i < w.size() / step; ++i) {
    if (t == DType::MXFP4) {  // 2^-10 .. 2^5: the edge exponents have a test of their own
      w[i * step] = static_cast<uint8_t>(118 + i % 16);
      continue;
    }
    const uint16_t d = f32_to_fp16(0.001f * static_cast<float>(i + 1));
    std::memcpy(w.data() + i * step, &d, 2);  // d first in the IQ4 blocks; random bits could be inf
  }
  return w;
}

TEST_P(IQuantsSimd, VecDotAndRowsDotMatchRef) {
  std::mt19937 rng(5);
  for (DType t : kTypes) {
    const DType at = vec_dot_type(t);
    EXPECT_EQ(level(t).act_type, at);
    for (int64_t n : {256, 256 * 3, 256 * 9}) {
      auto a = gaussian(n, 7 + static_cast<uint32_t>(n), 2.f);
      a[0] = 1e3f;  // its block's values at -127 .. 127
      a[1] = -1e3f;
      const auto qa = quantize(at, a);
      std::vector<uint8_t> qa_simd(qa.size());
      level(t).quantize_act(a.data(), qa_simd.data(), n);
      EXPECT_EQ(std::memcmp(qa.data(), qa_simd.data(), qa.size()), 0) << "activations as the ref makes them";
      const auto da = dequantize(at, qa.data(), n);
      // 7 rows, 16 bytes of padding each: full passes of 4, then 2 and 1.
      constexpr int kRows = 7;
      const size_t stride = row_bytes(t, n) + 16;
      std::vector<uint8_t> rows(stride * kRows);
      for (int r = 0; r < kRows; ++r) {
        const auto w = r < 4 ? random_row(t, n, rng) : quantize(t, gaussian(n, 50 + r));
        std::memcpy(rows.data() + r * stride, w.data(), w.size());
      }
      std::vector<float> got(kRows + 1, -7.f);
      level(t).rows_dot(n, kRows, rows.data(), stride, qa.data(), got.data());
      EXPECT_EQ(got[kRows], -7.f) << "wrote past the rows";
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* row = rows.data() + r * stride;
        double exact = 0;
        const double abs_sum = abs_dot(dequantize(t, row, n), da, &exact);
        const float want = vec_dot_ref(t, n, row, qa.data());
        EXPECT_NEAR(want, exact, kRefDotRelTol * abs_sum) << dtype_name(t) << " row " << r;
        EXPECT_NEAR(got[r], want, kSimdDotRelTol * abs_sum) << dtype_name(t) << " n=" << n << " row " << r;
        EXPECT_NEAR(level(t).vec_dot(n, row, qa.data()), want, kSimdDotRelTol * abs_sum) << dtype_name(t);
      }
    }
  }
}

// MXFP4's scales at the ends of E8M0 (e = 0, 1: subnormal floats; 254, 255: the largest), which
// the SIMD dots build from the exponent's bits: rows of one exponent against activation blocks whose
// fp16 d keeps each product finite and normal (2^15 for the smallest, 2^-24 for the largest), passes
// of 4, 2 and 1 rows. The want is a double dot of the spec's values (the floats would overflow).
TEST_P(IQuantsSimd, MxEdgeExponentsMatchRef) {
  const int64_t n = 256, nb = n / 32;
  constexpr int kRows = 7;
  std::mt19937 rng(11);
  for (int e : {0, 1, 2, 127, 254, 255}) {
    SCOPED_TRACE("e " + std::to_string(e));
    const uint16_t da = e <= 2 ? 0x7800 : e == 127 ? 0x3C00 : 0x0001;  // fp16 2^15, 1, 2^-24
    std::vector<BlockQ8_0> act(nb);
    for (auto& b : act) {
      b.d = da;
      for (auto& q : b.qs) q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    }
    std::vector<BlockMXFP4> w(nb * kRows);
    for (auto& b : w) {
      b.e = static_cast<uint8_t>(e);
      for (auto& q : b.qs) q = static_cast<uint8_t>(rng());
    }
    std::vector<float> got(kRows + 1, -7.f);
    level(DType::MXFP4).rows_dot(n, kRows, w.data(), nb * sizeof(BlockMXFP4), act.data(), got.data());
    EXPECT_EQ(got[kRows], -7.f) << "wrote past the rows";
    for (int r = 0; r < kRows; ++r) {
      const BlockMXFP4* row = w.data() + r * nb;
      double exact = 0, abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const BlockMXFP4& b = row[i / 32];
        const int j = static_cast<int>(i % 32), nibble = j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
        const double p = mxfp4_value(nibble, e) * (fp16_to_f32(da) * double(act[i / 32].qs[j]));
        exact += p;
        abs_sum += std::fabs(p);
      }
      ASSERT_GT(abs_sum, 0);
      const float want = kernels::vec_dot_ref(DType::MXFP4, n, row, act.data());
      EXPECT_TRUE(std::isnormal(want)) << want;
      EXPECT_NEAR(want, exact, kRefDotRelTol * abs_sum) << "row " << r;
      EXPECT_NEAR(got[r], want, kSimdDotRelTol * abs_sum) << "row " << r;
      EXPECT_NEAR(level(DType::MXFP4).vec_dot(n, row, act.data()), want, kSimdDotRelTol * abs_sum) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, IQuantsSimd, ::testing::Values(Isa::Avx2, Isa::Avx512),
                         [](const auto& p) { return std::string(isa_name(p.param)); });

}  // namespace
}  // namespace weft::kernels::iquants
