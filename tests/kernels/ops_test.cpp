// Float ops: every ISA table against double implementations written here, every dispatching op
// against its scalar reference, and the references themselves against double math.
#include "kernels/ops.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu_features.h"
#include "support/expect_error.h"
#include "support/uniform_floats.h"

#include <fmt/format.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace weft::kernels {
namespace {

// Tolerances. f32 sums of n terms drift by ~n * eps relative to their magnitude; our sizes stay
// under 5000 terms, and SIMD sums in a different order than the scalar loop.
constexpr double kSumRelTol = 2e-5;   // sum_sq / dot against double
constexpr double kElemRelTol = 2e-6;  // one multiply-add per element
constexpr double kExpRelTol = 1e-6;   // SIMD exp polynomial: ~2 ulp
constexpr double kOpAbsTol = 2e-5;    // whole ops (rms_norm, softmax, swiglu) on O(1) values
constexpr double kRopeAbsTol = 2e-6;  // one rotation of O(1) values in f32
constexpr double kAttnAbsTol = 2e-5;  // attention outputs, O(1) values
constexpr double kPinTol = 1e-5;      // hand-computed values, printed to 6+ digits

std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  return test_support::uniform_floats(n, seed, lo, hi);
}

// Guards against a broken generator making every comparison trivially equal.
void expect_varies(const std::vector<float>& v) {
  ASSERT_GE(v.size(), 2u);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  ASSERT_LT(*lo, *hi) << "test input is constant";
}

std::vector<const OpsKernels*> available_tables() {
  std::vector<const OpsKernels*> out;
  for (int i = 0; i < kIsaCount; ++i)
    if (const OpsKernels* k = ops_kernels_for_isa(static_cast<Isa>(i))) out.push_back(k);
  return out;
}

// Restores the best table after a test that forces one.
class OpsIsaTest : public ::testing::Test {
 protected:
  void SetUp() override { best_ = ops_kernels().isa; }
  void TearDown() override { force_ops_isa(best_); }
  Isa best_ = Isa::Scalar;
};

// ---------------------------------------------------------------- double implementations

double sum_sq_d(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return s;
}

std::vector<double> rms_norm_d(const std::vector<float>& x, const float* w, int64_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t t = 0; t < x.size() / n; ++t) {
    const double r = 1.0 / std::sqrt(sum_sq_d(x.data() + t * n, n) / n + eps);
    for (int64_t i = 0; i < n; ++i) y[t * n + i] = x[t * n + i] * r * (w ? w[i] : 1.0);
  }
  return y;
}

std::vector<double> softmax_d(const std::vector<float>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> y(x.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += y[i] = std::exp(x[i] - m);
  for (auto& v : y) v /= s;
  return y;
}

double silu_d(double g) { return g / (1.0 + std::exp(-g)); }

// llama3 frequency divisor written from Meta's reference independently of ops_rope.cpp.
double llama3_div_d(const RopeParams& p, int64_t i) {
  if (!p.freq_factors.empty()) return p.freq_factors[i];
  if (p.llama3_factor <= 0) return 1.0;
  const double freq = 1.0 / std::pow(double(p.freq_base), double(2 * i) / p.n_rot);
  const double wavelen = 2 * std::numbers::pi / freq;
  const double ctx = p.llama3_original_ctx, lo = p.llama3_low_freq_factor, hi = p.llama3_high_freq_factor;
  if (wavelen < ctx / hi) return 1.0;
  if (wavelen > ctx / lo) return p.llama3_factor;
  const double smooth = (ctx / wavelen - lo) / (hi - lo);
  const double new_freq = (1 - smooth) * freq / p.llama3_factor + smooth * freq;  // HF's form
  return freq / new_freq;
}

std::vector<double> rope_d(const std::vector<float>& x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                           const std::vector<int32_t>& pos, const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = p.n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double theta =
            pos[t] * double(p.freq_scale) * std::pow(double(p.freq_base), -2.0 * i / p.n_rot) / llama3_div_d(p, i);
        const int64_t base = (t * n_heads + h) * head_dim;
        const int64_t a = base + (p.neox ? i : 2 * i), b = base + (p.neox ? i + half : 2 * i + 1);
        const double x0 = x[a], x1 = x[b];
        y[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        y[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
  return y;
}

struct AttnCase {
  AttentionShape shape;
  std::vector<float> q, k, v;
  std::vector<int32_t> kv_of_q, pos;
  int64_t n_ctx;
  // Where row j of kv head kv starts in k and v (head-major, as attention reads them).
  size_t at(int64_t kv, int64_t j) const { return static_cast<size_t>((kv * n_ctx + j) * shape.head_dim); }
};

// interleaved: q head h reads kv head h % n_kv instead of llama.cpp's h / (n_q / n_kv), so that
// consecutive q heads never share a kv head.
AttnCase make_attn(int64_t n_q, int64_t n_kv, int64_t head_dim, std::vector<int32_t> pos, uint32_t seed,
                   bool interleaved = false) {
  AttnCase c;
  c.pos = std::move(pos);
  c.n_ctx = *std::max_element(c.pos.begin(), c.pos.end()) + 3;  // rows past every pos exist too
  const int64_t n_tokens = int64_t(c.pos.size());
  c.shape = AttentionShape{n_tokens, n_q, n_kv, head_dim, 1.0f / std::sqrt(float(head_dim))};
  c.shape.n_ctx = c.n_ctx;
  c.q = random_vec(n_tokens * n_q * head_dim, seed, -2.f, 2.f);
  c.k = random_vec(c.n_ctx * n_kv * head_dim, seed + 1, -2.f, 2.f);
  c.v = random_vec(c.n_ctx * n_kv * head_dim, seed + 2);
  // GQA as llama.cpp groups it: consecutive q heads share a kv head.
  for (int64_t h = 0; h < n_q; ++h) c.kv_of_q.push_back(int32_t(interleaved ? h % n_kv : h / (n_q / n_kv)));
  return c;
}

std::vector<double> attention_d(const AttnCase& c) {
  const auto& s = c.shape;
  const int64_t hd = s.head_dim;
  std::vector<double> out(s.n_tokens * s.n_q_heads * hd);
  for (int64_t t = 0; t < s.n_tokens; ++t)
    for (int64_t h = 0; h < s.n_q_heads; ++h) {
      // Keys first..pos (a sliding window: its last `window`); a sink: one more logit, no value.
      const int64_t kv = c.kv_of_q[h], first = s.window > 0 ? std::max<int64_t>(0, c.pos[t] - s.window + 1) : 0;
      const int64_t n_valid = c.pos[t] + 1 - first;
      std::vector<double> sc(n_valid);
      for (int64_t j = 0; j < n_valid; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e)
          d += double(c.q[(t * s.n_q_heads + h) * hd + e]) * c.k[c.at(kv, first + j) + e];
        sc[j] = d * s.scale;
      }
      double m = *std::max_element(sc.begin(), sc.end());
      if (s.sinks) m = std::max(m, double(s.sinks[h]));
      double sum = s.sinks ? std::exp(s.sinks[h] - m) : 0;
      for (auto& x : sc) sum += x = std::exp(x - m);
      for (int64_t e = 0; e < hd; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < n_valid; ++j) acc += sc[j] * c.v[c.at(kv, first + j) + e];
        out[(t * s.n_q_heads + h) * hd + e] = acc / sum;
      }
    }
  return out;
}

template <typename A, typename B>
void expect_near_all(const A& got, const B& want, double abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(double(got[i]), double(want[i]), abs_tol) << what << " at " << i;
}

// ---------------------------------------------------------------- ISA tables

const int64_t kSizes[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 4099};

TEST(OpsTables, ReductionsMatchDouble) {
  ASSERT_GE(available_tables().size(), 1u);
  for (const OpsKernels* k : available_tables()) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(isa_name(k->isa)) + " n=" + std::to_string(n));
      const auto a = random_vec(n, 1000 + n);
      if (n > 1) expect_varies(a);
      const double ss = sum_sq_d(a.data(), n);
      EXPECT_NEAR(k->sum_sq(a.data(), n), ss, kSumRelTol * ss);
      EXPECT_EQ(k->max(a.data(), n), *std::max_element(a.begin(), a.end()));  // max is exact
      // The max in every position, tails included, and a negative-only row.
      for (int64_t at = 0; at < std::min<int64_t>(n, 40); ++at) {
        std::vector<float> m = a;
        for (auto& x : m) x -= 5.f;
        m[at] = 1.5f;
        ASSERT_EQ(k->max(m.data(), n), 1.5f) << "max at " << at;
      }
    }
  }
}

TEST(OpsTables, ElementwiseMatchDouble) {
  for (const OpsKernels* k : available_tables()) {
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(isa_name(k->isa)) + " n=" + std::to_string(n));
      const auto x = random_vec(n, 3000 + n, -3.f, 3.f), w = random_vec(n, 4000 + n);
      const auto y0 = random_vec(n, 5000 + n);
      std::vector<float> y = y0;
      k->add(y.data(), x.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], double(y0[i]) + x[i], kElemRelTol * 4);
      y = x;
      k->scale(y.data(), -1.5f, n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] * -1.5f);  // one rounding: exact match
      k->scale_mul(x.data(), 0.5f, w.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], 0.5 * x[i] * w[i], kElemRelTol * 3);
      k->scale_mul(x.data(), 0.5f, nullptr, y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] * 0.5f);
      std::vector<float> out(n);
      k->swiglu(x.data(), w.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], silu_d(x[i]) * w[i], kOpAbsTol);
    }
  }
}

TEST(OpsTables, ExpAccurateOverFloatRange) {
  // exp_sum with m = 0 returns exp of each element: sweep the range where exp(x) is a normal float.
  std::vector<float> xs;
  for (double x = -87.0; x <= 88.0; x += 0.0137) xs.push_back(float(x));
  for (const OpsKernels* k : available_tables()) {
    SCOPED_TRACE(isa_name(k->isa));
    std::vector<float> e = xs;
    k->exp_sum(e.data(), 0.f, int64_t(e.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::exp(double(xs[i]));
      ASSERT_NEAR(e[i], want, kExpRelTol * want) << "x=" << xs[i];
    }
    // Outside it: underflow to (near) zero, overflow to inf, -inf (masked score) to exactly 0.
    std::vector<float> ext(16, -200.f);
    ext[1] = 100.f;
    ext[2] = -std::numeric_limits<float>::infinity();
    k->exp_sum(ext.data(), 0.f, 16);
    EXPECT_EQ(ext[0], 0.f);
    EXPECT_TRUE(std::isinf(ext[1]));
    EXPECT_EQ(ext[2], 0.f);
  }
}

TEST(OpsTables, SwigluSaturatesLikeSilu) {
  // silu(-100) is -0 in f32 (exp(100) overflows); silu(100) is 100.
  std::vector<float> g(32), u(32, 2.f), out(32);
  for (int i = 0; i < 32; ++i) g[i] = (i % 2 ? 100.f : -100.f) * (1 + i / 16);
  for (const OpsKernels* k : available_tables()) {
    k->swiglu(g.data(), u.data(), out.data(), 32);
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], g[i] > 0 ? 2 * g[i] : 0.f, 1e-6) << isa_name(k->isa) << " " << i;
  }
}

// GEGLU is llama.cpp's table lookup at every level: the same bits as the scalar table, over the
// table's range and past it (-10, 10), tails and in place included.
TEST(OpsTables, GegluGivesTheScalarBitsAtEveryLevel) {
  std::vector<float> g;
  for (double x = -12.0; x <= 12.0; x += 0.00371) g.push_back(static_cast<float>(x));
  for (float x : {-10.f, 10.f, std::nextafter(-10.f, 0.f), std::nextafter(10.f, 0.f), -0.f, 0.f, 1e-30f, -65504.f,
                  70000.f, 3e38f})
    g.push_back(x);
  const int64_t n = static_cast<int64_t>(g.size());
  const auto u = random_vec(n, 77, -3.f, 3.f);
  const OpsKernels* ref = ops_kernels_for_isa(Isa::Scalar);
  std::vector<float> want(n);
  ref->geglu(g.data(), u.data(), want.data(), n);
  EXPECT_EQ(want[0], 0.f * u[0]) << "below -10: 0";
  EXPECT_EQ(want[n - 1], 3e38f * u[n - 1]) << "from 10: the gate";
  for (const OpsKernels* k : available_tables())
    for (int64_t len : {n, n - 1, int64_t{13}, int64_t{7}}) {
      SCOPED_TRACE(std::string(isa_name(k->isa)) + " n=" + std::to_string(len));
      std::vector<float> out(len), in_place(g.begin(), g.begin() + len);
      k->geglu(g.data(), u.data(), out.data(), len);
      k->geglu(in_place.data(), u.data(), in_place.data(), len);
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want[i])) << "gate " << g[i];
        ASSERT_EQ(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(want[i])) << "in place, gate " << g[i];
      }
    }
}

TEST(OpsTables, BestIsTheDetectedLevel) {
  EXPECT_EQ(ops_kernels_for_isa(Isa::Scalar)->isa, Isa::Scalar);
  EXPECT_EQ(find_best(ops_kernels_for_isa)->isa, detected_isa());
}

// The load's line names the level every table above runs and, where granted, the tiles.
TEST(CpuFeatures, SummaryNamesTheLevel) {
  const std::string s = kernel_summary();
  EXPECT_EQ(s.rfind(isa_name(detected_isa()), 0), 0u) << s;
  EXPECT_EQ(s.find("amx") != std::string::npos, cpu_features().amx) << s;
  EXPECT_EQ(s.find("avx-vnni") != std::string::npos, cpu_features().avx_vnni && detected_isa() == Isa::Avx2) << s;
  EXPECT_EQ(s.find("L2 prefetch") != std::string::npos, cpu_features().l2_prefetch > 0 && detected_isa() != Isa::Scalar)
      << s;
}

// ---------------------------------------------------------------- rms_norm

TEST(RmsNorm, RefMatchesDouble) {
  const int64_t n = 67, n_tokens = 3;
  const auto x = random_vec(n * n_tokens, 11, -4.f, 4.f), w = random_vec(n, 12, 0.5f, 1.5f);
  expect_varies(x);
  std::vector<float> y(x.size());
  rms_norm_ref(x.data(), w.data(), y.data(), n_tokens, n, 1e-5f);
  expect_near_all(y, rms_norm_d(x, w.data(), n, 1e-5), kOpAbsTol, "rms_norm_ref");
  rms_norm_ref(x.data(), nullptr, y.data(), n_tokens, n, 1e-5f);
  expect_near_all(y, rms_norm_d(x, nullptr, n, 1e-5), kOpAbsTol, "rms_norm_ref no weight");
  // Normalised rows have mean square ~1: the op is not an identity or a zeroing.
  EXPECT_NEAR(sum_sq_d(y.data(), n) / n, 1.0, 1e-3);
}

TEST_F(OpsIsaTest, RmsNormMatchesRefOnEveryIsa) {
  const int64_t n = 4096 + 5, n_tokens = 2;
  const auto x = random_vec(n * n_tokens, 21, -3.f, 3.f), w = random_vec(n, 22);
  std::vector<float> want(x.size());
  rms_norm_ref(x.data(), w.data(), want.data(), n_tokens, n, 1e-6f);
  for (const OpsKernels* k : available_tables()) {
    force_ops_isa(k->isa);
    std::vector<float> y = x;  // in place: y aliases x
    rms_norm(y.data(), w.data(), y.data(), n_tokens, n, 1e-6f);
    expect_near_all(y, want, kOpAbsTol, std::string("rms_norm ") + isa_name(k->isa));
  }
}

TEST_F(OpsIsaTest, RmsNormHeadsNormalisesEachHead) {
  const int64_t n_tokens = 3, n_heads = 4, head_dim = 24;
  auto x = random_vec(n_tokens * n_heads * head_dim, 31, -2.f, 2.f);
  // Give heads very different scales so a per-token norm would be visibly wrong.
  for (size_t i = 0; i < x.size(); ++i) x[i] *= float(1 + (i / head_dim) % n_heads * 10);
  const auto w = random_vec(head_dim, 32);
  const auto want = rms_norm_d(x, w.data(), head_dim, 1e-6);
  for (const OpsKernels* k : available_tables()) {
    force_ops_isa(k->isa);
    std::vector<float> y = x;
    rms_norm_heads(y.data(), w.data(), n_tokens, n_heads, head_dim, 1e-6f);
    expect_near_all(y, want, kOpAbsTol, std::string("rms_norm_heads ") + isa_name(k->isa));
  }
}

// ---------------------------------------------------------------- softmax, swiglu, add

TEST_F(OpsIsaTest, SoftmaxMatchesDoubleAndIsStable) {
  for (const OpsKernels* k : available_tables()) {
    force_ops_isa(k->isa);
    for (int64_t n : {1, 5, 16, 33, 1000}) {
      // Logits up to 1e3 would overflow exp() without the max subtraction.
      auto x = random_vec(n, 41 + n, -1000.f, 1000.f);
      const auto want = softmax_d(x);
      softmax(x.data(), n);
      expect_near_all(x, want, kOpAbsTol, std::string("softmax ") + isa_name(k->isa));
      double s = 0;
      for (float v : x) s += v;
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
}

TEST_F(OpsIsaTest, SwigluAndAddMatchRef) {
  const int64_t n = 1031;
  const auto g = random_vec(n, 51, -8.f, 8.f), u = random_vec(n, 52), y0 = random_vec(n, 53);
  const OpsKernels& ref = *ops_kernels_for_isa(Isa::Scalar);
  std::vector<float> want_sw(n), want_add = y0;
  ref.swiglu(g.data(), u.data(), want_sw.data(), n);
  ref.add(want_add.data(), g.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(want_sw[i], silu_d(g[i]) * u[i], kOpAbsTol);
  for (const OpsKernels* k : available_tables()) {
    force_ops_isa(k->isa);
    std::vector<float> sw(n), add = y0;
    swiglu(g.data(), u.data(), sw.data(), n);
    add_inplace(add.data(), g.data(), n);
    expect_near_all(sw, want_sw, kOpAbsTol, std::string("swiglu ") + isa_name(k->isa));
    expect_near_all(add, want_add, 0.0, std::string("add ") + isa_name(k->isa));  // one rounding: exact
  }
}

// gpt-oss's clamped SwiGLU against its definition in double: the clamps at +-limit on both inputs.
TEST(SwigluOai, MatchesDoubleAndClamps) {
  const int64_t n = 1031;
  const float alpha = 1.702f, limit = 7.f;
  auto g = random_vec(n, 54, -12.f, 12.f), u = random_vec(n, 55, -12.f, 12.f);
  g[0] = 50.f, u[0] = -50.f;  // both clamped: 7 sigmoid(1.702 * 7) * (-6)
  std::vector<float> y(n);
  swiglu_oai(g.data(), u.data(), y.data(), n, alpha, limit);
  for (int64_t i = 0; i < n; ++i) {
    const double x = std::min<double>(g[i], limit), v = std::clamp<double>(u[i], -limit, limit);
    const double want = x / (1 + std::exp(-alpha * x)) * (v + 1);
    ASSERT_NEAR(y[i], want, 1e-5 * std::max(1.0, std::abs(want))) << i;
  }
  EXPECT_NEAR(y[0], 7.0 / (1 + std::exp(-1.702 * 7.0)) * -6.0, 1e-4);
}

// ---------------------------------------------------------------- rope

TEST(Rope, PinnedHandComputedValues) {
  // head_dim 4, n_rot 4, base 10000, pos 3: pair 0 turns by 3 rad, pair 1 by 3 * 10000^(-1/2) = 0.03.
  // Values from cos/sin of 3 and 0.03 by hand (python math): see the expressions beside them.
  RopeParams p;
  p.n_rot = 4;
  const int32_t pos = 3;
  for (bool neox : {false, true}) {
    p.neox = neox;
    std::vector<float> a = {1, 2, 3, 4}, b = a;
    rope(a.data(), 1, 1, 4, &pos, p);
    rope_ref(b.data(), 1, 1, 4, &pos, p);
    const std::vector<double> want = neox ? std::vector<double>{-1.413352520780047,   // 1 cos3 - 3 sin3
                                                                1.8791180666879925,   // 2 cos.03 - 4 sin.03
                                                                -2.828857481741469,   // 1 sin3 + 3 cos3
                                                                4.058191135400942}    // 2 sin.03 + 4 cos.03
                                          : std::vector<double>{-1.27223251272018,    // 1 cos3 - 2 sin3
                                                                -1.8388649851410237,  // 1 sin3 + 2 cos3
                                                                2.87866810043698,     // 3 cos.03 - 4 sin.03
                                                                4.088186635603437};   // 3 sin.03 + 4 cos.03
    expect_near_all(a, want, kPinTol, neox ? "rope neox" : "rope normal");
    expect_near_all(b, want, kPinTol, neox ? "rope_ref neox" : "rope_ref normal");
  }
}

TEST(Rope, Llama3FactorsPinned) {
  // Llama 3.1 8B: base 500000, factor 8, low 1, high 4, original context 8192, n_rot 128.
  // Expected divisors from Meta's formula evaluated by hand (python, double).
  RopeParams p;
  p.n_rot = 128;
  p.freq_base = 500000.f;
  p.llama3_factor = 8.f;
  p.llama3_low_freq_factor = 1.f;
  p.llama3_high_freq_factor = 4.f;
  p.llama3_original_ctx = 8192.f;
  EXPECT_EQ(rope_freq_factor(p, 0), 1.0f);                           // wavelen 2 pi: high frequency, kept
  EXPECT_EQ(rope_freq_factor(p, 28), 1.0f);                          // wavelen 1956 < 2048
  EXPECT_NEAR(rope_freq_factor(p, 29), 1.207483871283662, kPinTol);  // wavelen 2402: interpolated
  EXPECT_NEAR(rope_freq_factor(p, 30), 1.5534146285049255, kPinTol);
  EXPECT_NEAR(rope_freq_factor(p, 32), 2.6945296878947333, kPinTol);
  EXPECT_NEAR(rope_freq_factor(p, 34), 5.257326588708467, kPinTol);  // wavelen 6695
  EXPECT_EQ(rope_freq_factor(p, 35), 8.0f);                          // wavelen 8219 > 8192: divided by factor
  EXPECT_EQ(rope_freq_factor(p, 63), 8.0f);
  for (int64_t i = 0; i < 64; ++i) EXPECT_NEAR(rope_freq_factor(p, i), llama3_div_d(p, i), 1e-5) << i;
  p.llama3_factor = 0.f;  // off
  EXPECT_EQ(rope_freq_factor(p, 63), 1.0f);
}

struct RopeCase {
  const char* name;
  int64_t head_dim, n_rot;
  bool neox;
  float freq_scale, llama3_factor, base;
};

TEST(Rope, FastMatchesRefAndRefMatchesDouble) {
  const RopeCase cases[] = {
      {"normal full", 64, 64, false, 1.f, 0.f, 10000.f},    {"neox full", 128, 128, true, 1.f, 0.f, 1000000.f},
      {"normal partial", 80, 32, false, 1.f, 0.f, 10000.f},  // dims 32..79 pass through
      {"neox partial", 96, 64, true, 0.25f, 0.f, 10000.f},   // linear scaling too
      {"llama3", 128, 128, false, 1.f, 8.f, 500000.f},
  };
  const int64_t n_tokens = 4, n_heads = 3;
  const std::vector<int32_t> pos = {0, 1, 517, 20000};
  for (const RopeCase& c : cases) {
    SCOPED_TRACE(c.name);
    RopeParams p;
    p.n_rot = c.n_rot;
    p.neox = c.neox;
    p.freq_scale = c.freq_scale;
    p.freq_base = c.base;
    p.llama3_factor = c.llama3_factor;
    const auto x = random_vec(n_tokens * n_heads * c.head_dim, 61 + c.head_dim);
    expect_varies(x);
    std::vector<float> fast = x, ref = x;
    rope(fast.data(), n_tokens, n_heads, c.head_dim, pos.data(), p);
    rope_ref(ref.data(), n_tokens, n_heads, c.head_dim, pos.data(), p);
    expect_near_all(fast, ref, kRopeAbsTol, "rope vs ref");
    expect_near_all(ref, rope_d(x, n_tokens, n_heads, c.head_dim, pos, p), kRopeAbsTol, "ref vs double");
    // Position 0 is the identity; dims past n_rot are untouched at every position.
    for (int64_t i = 0; i < n_heads * c.head_dim; ++i) EXPECT_EQ(fast[i], x[i]);
    for (int64_t r = 0; r < n_tokens * n_heads; ++r)
      for (int64_t d = c.n_rot; d < c.head_dim; ++d) EXPECT_EQ(fast[r * c.head_dim + d], x[r * c.head_dim + d]);
    // Rotation keeps norms: catches a swapped sign that a self-consistent test would miss.
    EXPECT_NEAR(sum_sq_d(fast.data(), int64_t(fast.size())), sum_sq_d(x.data(), int64_t(x.size())), 1e-3);
    EXPECT_NE(fast[3 * n_heads * c.head_dim], x[3 * n_heads * c.head_dim]);
  }
}

TEST(Rope, FreqFactorsTensorOverridesLlama3) {
  // A rope_freqs tensor (here the llama3 divisors scaled by 1.5, so neither path can pass for
  // the other) is what a converted Llama 3.1 GGUF carries.
  RopeParams p;
  p.n_rot = 32;
  p.freq_base = 500000.f;
  p.llama3_factor = 8.f;
  p.llama3_original_ctx = 64.f;  // small context: the interpolated band falls inside 16 pairs
  std::vector<float> ff(16);
  for (int64_t i = 0; i < 16; ++i) ff[i] = 1.5f * rope_freq_factor(p, i);
  EXPECT_GT(ff[15] / ff[0], 7.f);  // llama3 scaling is active in this configuration
  p.freq_factors = ff;
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(rope_freq_factor(p, i), ff[i]);
  const std::vector<int32_t> pos = {7, 300};
  const auto x = random_vec(2 * 2 * 40, 111);
  std::vector<float> fast = x, ref = x;
  rope(fast.data(), 2, 2, 40, pos.data(), p);
  rope_ref(ref.data(), 2, 2, 40, pos.data(), p);
  const auto want = rope_d(x, 2, 2, 40, pos, p);
  expect_near_all(fast, want, kRopeAbsTol, "rope freq_factors");
  expect_near_all(ref, want, kRopeAbsTol, "rope_ref freq_factors");
  p.freq_factors.resize(15);
  EXPECT_ERROR(rope(fast.data(), 2, 2, 40, pos.data(), p), "rope: 15 freq_factors for n_rot");
}

TEST(Rope, RejectsBadNRot) {
  RopeParams p;
  p.n_rot = 7;
  std::vector<float> x(8);
  const int32_t pos = 1;
  EXPECT_ERROR(rope(x.data(), 1, 1, 8, &pos, p), "rope: n_rot 7 must be even");
  p.n_rot = 10;
  EXPECT_ERROR(rope_ref(x.data(), 1, 1, 8, &pos, p), "rope: n_rot 10 must be even");
}

// ---------------------------------------------------------------- attention

struct AttnConfig {
  int64_t n_q, n_kv;
  bool interleaved;
};

TEST_F(OpsIsaTest, AttentionMatchesRefAndDouble) {
  // Positions on both sides of the kernel's 64-row tiles, and past two of them.
  const std::vector<int32_t> pos = {0, 1, 5, 13, 63, 64, 65, 130};
  const AttnConfig configs[] = {{8, 2, false},
                                {8, 1, false},
                                {8, 8, false},
                                {12, 1, false},  // a group of 12 heads: more than one pass
                                {8, 2, true}};   // GQA map that is not grouped consecutively
  for (const AttnConfig& cfg : configs) {
    for (int64_t head_dim : {64, 44, 512}) {  // 44: SIMD loops and 8-dim value blocks end in a tail
      const int64_t n_kv = cfg.n_kv;
      SCOPED_TRACE("n_q=" + std::to_string(cfg.n_q) + " n_kv=" + std::to_string(n_kv) +
                   " head_dim=" + std::to_string(head_dim) + (cfg.interleaved ? " interleaved" : ""));
      const AttnCase c = make_attn(cfg.n_q, n_kv, head_dim, pos, uint32_t(71 + n_kv + head_dim), cfg.interleaved);
      const auto want = attention_d(c);
      std::vector<float> ref(want.size());
      attention_ref(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), ref.data());
      expect_near_all(ref, want, kAttnAbsTol, "attention_ref vs double");
      for (const OpsKernels* k : available_tables()) {
        force_ops_isa(k->isa);
        std::vector<float> out(want.size(), NAN);
        attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), out.data());
        expect_near_all(out, ref, kAttnAbsTol, std::string("attention ") + isa_name(k->isa));
      }
    }
  }
}

// One token (decode: its own kernel, keys across lanes) at positions around the lane width and the
// 64-key tiles, GQA groups of 1 to 20 heads (more rows than one block), head dims with and without
// a vector tail, f32 and f16 caches.
TEST_F(OpsIsaTest, AttentionDecodeMatchesRef) {
  const AttnConfig configs[] = {{8, 2, false}, {8, 8, false}, {8, 1, false}, {20, 1, false}, {8, 2, true}};
  for (const AttnConfig& cfg : configs)
    for (int64_t head_dim : {64, 128, 44, 512})  // 512: Gemma 4's global heads
      for (int32_t pos : {0, 1, 7, 15, 16, 17, 63, 64, 65, 200})
        for (DType cache : {DType::F32, DType::F16}) {
          SCOPED_TRACE(fmt::format("n_q={} n_kv={} head_dim={} pos={} cache={}", cfg.n_q, cfg.n_kv, head_dim, pos,
                                   dtype_name(cache)));
          const AttnCase c =
              make_attn(cfg.n_q, cfg.n_kv, head_dim, {pos}, uint32_t(7 + pos + head_dim), cfg.interleaved);
          std::vector<uint16_t> k16(c.k.size()), v16(c.v.size());
          for (size_t i = 0; i < c.k.size(); ++i) k16[i] = f32_to_fp16(c.k[i]), v16[i] = f32_to_fp16(c.v[i]);
          AttentionShape s = c.shape;
          s.k_type = s.v_type = cache;
          const void* k = cache == DType::F16 ? static_cast<const void*>(k16.data()) : c.k.data();
          const void* v = cache == DType::F16 ? static_cast<const void*>(v16.data()) : c.v.data();
          std::vector<float> ref(c.q.size());
          attention_ref(s, c.q.data(), k, v, c.kv_of_q.data(), c.pos.data(), ref.data());
          for (const OpsKernels* t : available_tables()) {
            force_ops_isa(t->isa);
            std::vector<float> out(ref.size(), NAN);
            attention(s, c.q.data(), k, v, c.kv_of_q.data(), c.pos.data(), out.data());
            expect_near_all(out, ref, kAttnAbsTol, std::string("attention ") + isa_name(t->isa));
          }
        }
}

// Gemma 4's scores: unscaled over heads of 512, so a row's scores spread by hundreds and most of
// its softmax terms fall under e^-44, where the kernels drop them (attention_simd.h). Prompts and
// decode (one token a call), every table, against the double-precision attention.
TEST_F(OpsIsaTest, UnscaledWideHeadsMatchDouble) {
  AttnCase c = make_attn(8, 1, 512, {0, 1, 17, 63, 64, 65, 130}, 303);
  c.shape.scale = 1.f;
  const auto want = attention_d(c);
  double spread = 0;  // the widest gap between a row's scores: well past the dropped terms' e^-44
  for (int64_t t = 0; t < c.shape.n_tokens; ++t) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t j = 0; j <= c.pos[t]; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < 512; ++d) dot += double{c.q[t * 8 * 512 + d]} * c.k[c.at(0, j) + d];
      lo = std::min(lo, dot), hi = std::max(hi, dot);
    }
    spread = std::max(spread, hi - lo);
  }
  ASSERT_GT(spread, 100.0);
  for (const OpsKernels* k : available_tables()) {
    force_ops_isa(k->isa);
    std::vector<float> out(want.size(), NAN);
    attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), out.data());
    expect_near_all(out, want, kAttnAbsTol, std::string("prompt ") + isa_name(k->isa));
    AttentionShape one = c.shape;
    one.n_tokens = 1;
    const int64_t row = 8 * 512;
    for (int64_t t = 0; t < c.shape.n_tokens; ++t)
      attention(one, c.q.data() + t * row, c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data() + t,
                out.data() + t * row);
    expect_near_all(out, want, kAttnAbsTol, std::string("decode ") + isa_name(k->isa));
  }
}

// Sliding windows (a window's keys only, the cache's rows starting past position 0 as a moved
// window's do) and attention sinks (gpt-oss: a per-head logit in the denominator), prompts and
// decode, every table against the double-precision attention.
TEST_F(OpsIsaTest, AttentionWithWindowsAndSinksMatchesDouble) {
  for (const std::vector<int32_t>& pos : {std::vector<int32_t>{0, 1, 5, 13, 63, 64, 65, 130}, {90}, {200}})
    for (int64_t window : {0, 5, 70})
      for (float sink_scale : {0.f, 2.f, 12.f}) {  // none, comparable to the scores, dominating them
        for (int64_t head_dim : {64, 44}) {
          SCOPED_TRACE(
              fmt::format("tokens={} window={} sinks={} head_dim={}", pos.size(), window, sink_scale, head_dim));
          AttnCase c = make_attn(8, 2, head_dim, pos, uint32_t(5 + window + head_dim));
          const std::vector<float> sinks = random_vec(8, 77, -sink_scale, sink_scale);
          c.shape.window = window;
          if (sink_scale > 0) c.shape.sinks = sinks.data();
          const auto want = attention_d(c);
          // The cache as a moved window holds it: rows from the first key any token needs.
          int64_t base = 0;
          if (window > 0) base = std::max<int64_t>(0, *std::min_element(pos.begin(), pos.end()) - window + 1);
          AttentionShape s = c.shape;
          s.kv_pos0 = base;
          s.n_ctx = c.n_ctx - base;
          std::vector<float> k, v;
          for (int64_t kv = 0; kv < 2; ++kv) {
            k.insert(k.end(), c.k.begin() + c.at(kv, base), c.k.begin() + c.at(kv, c.n_ctx));
            v.insert(v.end(), c.v.begin() + c.at(kv, base), c.v.begin() + c.at(kv, c.n_ctx));
          }
          std::vector<float> ref(want.size());
          attention_ref(s, c.q.data(), k.data(), v.data(), c.kv_of_q.data(), c.pos.data(), ref.data());
          expect_near_all(ref, want, kAttnAbsTol, "attention_ref vs double");
          for (const OpsKernels* t : available_tables()) {
            force_ops_isa(t->isa);
            std::vector<float> out(want.size(), NAN);
            attention(s, c.q.data(), k.data(), v.data(), c.kv_of_q.data(), c.pos.data(), out.data());
            expect_near_all(out, ref, kAttnAbsTol, std::string("attention ") + isa_name(t->isa));
          }
        }
      }
}

// f16 caches (llama.cpp's -ctk/-ctv f16), K and V each: every table reads the halves as the
// reference does.
TEST_F(OpsIsaTest, AttentionOverF16CachesMatchesRef) {
  const AttnCase c = make_attn(8, 2, 64, {0, 3, 63, 64, 100}, 91);
  std::vector<uint16_t> k16(c.k.size()), v16(c.v.size());
  for (size_t i = 0; i < c.k.size(); ++i) k16[i] = f32_to_fp16(c.k[i]), v16[i] = f32_to_fp16(c.v[i]);
  for (DType kt : {DType::F16, DType::F32})
    for (DType vt : {DType::F16, DType::F32}) {
      AttentionShape s = c.shape;
      s.k_type = kt;
      s.v_type = vt;
      const void* k = kt == DType::F16 ? static_cast<const void*>(k16.data()) : c.k.data();
      const void* v = vt == DType::F16 ? static_cast<const void*>(v16.data()) : c.v.data();
      std::vector<float> ref(c.q.size()), f32(c.q.size());
      attention_ref(s, c.q.data(), k, v, c.kv_of_q.data(), c.pos.data(), ref.data());
      attention_ref(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), f32.data());
      if (kt == DType::F16 || vt == DType::F16) {
        EXPECT_NE(ref, f32) << "halves must change something";
      }
      for (const OpsKernels* t : available_tables()) {
        force_ops_isa(t->isa);
        std::vector<float> out(ref.size(), NAN);
        attention(s, c.q.data(), k, v, c.kv_of_q.data(), c.pos.data(), out.data());
        expect_near_all(out, ref, kAttnAbsTol,
                        fmt::format("attention {} k {} v {}", isa_name(t->isa), dtype_name(kt), dtype_name(vt)));
      }
    }
  AttentionShape bad = c.shape;
  bad.k_type = DType::Q8_0;
  std::vector<float> out(c.q.size());
  EXPECT_ERROR(attention(bad, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), out.data()),
               "attention: cache type");
}

TEST_F(OpsIsaTest, F32ToF16RowRoundsAsTheScalarConversion) {
  std::vector<float> x = random_vec(1000, 5, -70000.f, 70000.f);
  for (float special : {0.f, -0.f, 1e-8f, -3e-5f, 6.1e-5f, 65504.f, 65520.f, 1e30f, -INFINITY, INFINITY})
    x.push_back(special);
  for (int i = 0; i < 100; ++i) x.push_back(std::ldexp(1.f + i / 100.f, -20 + i / 5));  // subnormal halves too
  for (const OpsKernels* t : available_tables()) {
    force_ops_isa(t->isa);
    std::vector<uint16_t> y(x.size());
    f32_to_f16_row(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], f32_to_fp16(x[i])) << isa_name(t->isa) << " x=" << x[i];
  }
}

TEST(Attention, HeadRangesComposeAndLeaveOtherHeadsAlone) {
  const AttnCase c = make_attn(8, 2, 32, {2, 3, 9}, 81);
  std::vector<float> full(c.q.size()), split(c.q.size(), NAN);
  attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), full.data());
  AttentionShape s = c.shape;
  s.head_begin = 0;
  s.head_end = 3;  // splits a GQA group on purpose
  attention(s, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), split.data());
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t h = 3; h < 8; ++h) EXPECT_TRUE(std::isnan(split[(t * 8 + h) * 32])) << "head " << h << " written";
  s.head_begin = 3;
  s.head_end = 8;
  attention(s, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), split.data());
  expect_near_all(split, full, 0.0, "split heads");
  s.head_end = 9;
  EXPECT_ERROR(attention(s, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), split.data()),
               "head range [3, 9) outside [0, 8)");
}

TEST(Attention, IsCausalByPosition) {
  AttnCase c = make_attn(4, 2, 16, {0, 4}, 91);
  std::vector<float> before(c.q.size()), after(c.q.size());
  attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), before.data());
  // Token 0 at pos 0 sees only row 0: its output is v row 0 of its kv head.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t d = 0; d < 16; ++d) EXPECT_NEAR(before[h * 16 + d], c.v[c.at(c.kv_of_q[h], 0) + d], 1e-6);
  // Rows past pos[1] = 4 must not matter; row 4 must.
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t j = 5; j < c.n_ctx; ++j)
      for (int64_t e = 0; e < 16; ++e) c.k[c.at(kv, j) + e] = 50.f, c.v[c.at(kv, j) + e] = 1e6f;
  attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), after.data());
  expect_near_all(after, before, 0.0, "rows beyond pos");
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t e = 0; e < 16; ++e) c.v[c.at(kv, 4) + e] += 1.f;
  attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), after.data());
  EXPECT_NE(after[4 * 16], before[4 * 16]);
}

TEST(Attention, LargeScoresStayFinite) {
  AttnCase c = make_attn(8, 2, 64, {3, 7}, 101);
  for (auto& x : c.q) x *= 300.f;  // scores in the thousands: exp() overflows without the max shift
  std::vector<float> out(c.q.size());
  attention(c.shape, c.q.data(), c.k.data(), c.v.data(), c.kv_of_q.data(), c.pos.data(), out.data());
  expect_near_all(out, attention_d(c), kAttnAbsTol, "large scores");
}

}  // namespace
}  // namespace weft::kernels
