// Gated DeltaNet's kernels against double-precision loops written from delta-net-base.cpp: the
// causal conv with its carried state, the delta rule's step and its chunked form on every ISA
// table, and the recurrence over a sequence in pieces against one pass.
#include "kernels/linear_attention.h"
#include "kernels/ops.h"

#include "support/uniform_floats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace weft::kernels {
namespace {

using test_support::uniform_floats;

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// The conv over [zeros of kernel - 1; x] at once; in pieces of 1, 2 and the rest through the
// state, the same outputs and a state of the last inputs.
TEST(CausalConv, PiecesThroughTheStateMatchOnePass) {
  constexpr int64_t n = 5, kernel = 4, tokens = 9;
  const auto x = uniform_floats(tokens * n, 1), taps = uniform_floats(n * kernel, 2);
  std::vector<double> want(tokens * n);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t src = t - (kernel - 1) + j;
        if (src >= 0) sum += double(taps[j * n + c]) * x[src * n + c];
      }
      want[t * n + c] = silu(sum);
    }
  std::vector<float> state(n * (kernel - 1), 0.f), y(tokens * n, -7.f);
  int64_t t0 = 0;
  for (int64_t piece : {int64_t{1}, int64_t{2}, tokens - 3}) {
    causal_conv_silu(x.data() + t0 * n, piece, n, n, taps.data(), kernel, state.data(), y.data() + t0 * n);
    t0 += piece;
  }
  for (int64_t i = 0; i < tokens * n; ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
  for (int64_t r = 0; r < kernel - 1; ++r)  // the last three inputs, oldest first
    for (int64_t c = 0; c < n; ++c) EXPECT_EQ(state[r * n + c], x[(tokens - 3 + r) * n + c]);
}

// A feature chunk of a wider row (the runner's pool items): every row `stride` apart.
TEST(CausalConv, ReadsRowsAStrideApart) {
  constexpr int64_t n = 3, stride = 7, kernel = 2, tokens = 4;
  const auto x = uniform_floats(tokens * stride, 3), taps = uniform_floats(kernel * stride, 4);
  std::vector<float> state(stride, 0.5f), y(tokens * stride, -7.f);
  causal_conv_silu(x.data() + 2, tokens, n, stride, taps.data() + 2, kernel, state.data() + 2, y.data() + 2);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 2; c < 2 + n; ++c) {
      const double prev = t == 0 ? 0.5 : x[(t - 1) * stride + c];
      EXPECT_NEAR(y[t * stride + c], silu(taps[c] * prev + taps[stride + c] * x[t * stride + c]), 1e-5);
    }
  EXPECT_EQ(y[0], -7.f) << "features outside the chunk untouched";
  EXPECT_EQ(state[0], 0.5f);
  EXPECT_EQ(state[2], x[3 * stride + 2]);
}

std::vector<const OpsKernels*> tables() {
  std::vector<const OpsKernels*> out;
  for (int i = 0; i < kIsaCount; ++i)
    if (const OpsKernels* k = ops_kernels_for_isa(static_cast<Isa>(i))) out.push_back(k);
  return out;
}

// Every table's step against double: head sizes around the vector widths (tails included).
TEST(DeltaStep, EveryTableMatchesDouble) {
  for (int64_t n : {1, 7, 16, 19, 40, 64, 72, 128}) {
    auto S0 = uniform_floats(n * n, 10 + n, -0.5f, 0.5f);
    const auto q = uniform_floats(n, 20 + n), k = uniform_floats(n, 30 + n), v = uniform_floats(n, 40 + n);
    const float beta = 0.7f, decay = 0.9f, scale = 0.25f;
    std::vector<double> S(S0.begin(), S0.end()), want(n);  // row i: key feature i
    for (int64_t j = 0; j < n; ++j) {
      double sk = 0;
      for (int64_t i = 0; i < n; ++i) sk += (S[i * n + j] *= decay) * k[i];
      const double err = (v[j] - sk) * beta;
      double o = 0;
      for (int64_t i = 0; i < n; ++i) o += (S[i * n + j] += err * k[i]) * q[i];
      want[j] = o * scale;
    }
    for (const OpsKernels* t : tables()) {
      SCOPED_TRACE(std::string(isa_name(t->isa)) + " n=" + std::to_string(n));
      std::vector<float> state = S0, out(n, -9.f);
      t->delta_step({state.data(), q.data(), k.data(), v.data(), out.data(), beta, decay, scale, n});
      for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(out[j], want[j], 2e-5);
      for (int64_t i = 0; i < n * n; ++i) ASSERT_NEAR(state[i], S[i], 2e-6) << i;
    }
  }
}

// The gates as ggml computes them: softplus's linear branch past 20, and the rate a sigmoid.
TEST(DeltaGates, SoftplusDecayAndSigmoidRate) {
  const DeltaGates g = delta_gates(0.5f, 1.0f, -0.3f, 0.25f);
  EXPECT_NEAR(g.beta, 1 / (1 + std::exp(-0.5)), 1e-7);
  EXPECT_NEAR(g.decay, std::exp(std::log1p(std::exp(1.25)) * -0.3), 1e-6);
  EXPECT_NEAR(delta_gates(0, 30.f, -0.01f, 0).decay, std::exp(-0.3), 1e-6) << "softplus(x) = x past 20";
  EXPECT_EQ(delta_gates(0, -200.f, -1.f, 0).decay, 1.f) << "no decay where softplus underflows";
}

// A sequence in one call against token by token: the state carries everything between calls.
TEST(DeltaRule, OneCallMatchesTokenByToken) {
  constexpr int64_t hd = 16, tokens = 6, stride = 3 * hd;  // rows of a wider step
  const auto q = uniform_floats(tokens * stride, 50), k = uniform_floats(tokens * stride, 51),
             v = uniform_floats(tokens * stride, 52);
  std::vector<DeltaGates> gates;
  for (int64_t t = 0; t < tokens; ++t) gates.push_back(delta_gates(0.1f * t, -0.5f + 0.2f * t, -0.4f, 0.3f));
  std::vector<float> s1(hd * hd, 0.f), s2 = s1, o1(tokens * stride, 0.f), o2 = o1;
  delta_rule(s1.data(), hd, tokens, q.data(), k.data(), v.data(), stride, stride, gates.data(), 1, o1.data());
  for (int64_t t = 0; t < tokens; ++t)
    delta_rule(s2.data(), hd, 1, q.data() + t * stride, k.data() + t * stride, v.data() + t * stride, stride, stride,
               gates.data() + t, 1, o2.data() + t * stride);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(s1, s2);
  double energy = 0;
  for (float x : o1) energy += x * x;
  EXPECT_GT(energy, 1e-3) << "the outputs must not vanish for the comparison to mean anything";
}

// Unit-length rows (as the engine's L2-normed q and k), `stride` apart.
std::vector<float> unit_rows(int64_t rows, int64_t n, int64_t stride, uint32_t seed) {
  auto x = uniform_floats(static_cast<size_t>(rows * stride), seed);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[r * stride + i] * x[r * stride + i];
    for (int64_t i = 0; i < n; ++i) x[r * stride + i] = static_cast<float>(x[r * stride + i] / std::sqrt(ss));
  }
  return x;
}

// The chunked form on every table against the recurrence token by token in double: head sizes
// around the vector widths, chunks of 1 to 64 tokens, rates and decays from none to total (a
// decay of e^-40 a token underflows any product of decays, not their logs).
TEST(DeltaChunk, EveryTableMatchesTheRecurrenceInDouble) {
  for (int64_t n : {16, 19, 32, 128})
    for (int64_t m : {1, 5, 16, 64}) {
      const int64_t stride = n + 3;  // rows of a wider step
      const auto seed = static_cast<uint32_t>(60 + n + m);
      const auto q = unit_rows(m, n, stride, seed), k = unit_rows(m, n, stride, seed + 1);
      const auto v = uniform_floats(static_cast<size_t>(m * stride), seed + 2),
                 S0 = uniform_floats(static_cast<size_t>(n * n), seed + 3, -0.3f, 0.3f);
      std::vector<float> beta(m), log_decay(m);
      std::mt19937 rng(seed + 4);
      std::uniform_real_distribution<float> u01(0.f, 1.f);
      for (int64_t t = 0; t < m; ++t) {
        beta[t] = u01(rng);
        log_decay[t] = t % 7 == 3 ? -40.f : -2.f * u01(rng);
      }
      const float scale = 1.f / std::sqrt(static_cast<float>(n));
      std::vector<double> S(S0.begin(), S0.end()), want(m * n);
      for (int64_t t = 0; t < m; ++t) {
        const double decay = std::exp(static_cast<double>(log_decay[t]));
        for (int64_t j = 0; j < n; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < n; ++i) sk += (S[i * n + j] *= decay) * k[t * stride + i];
          const double err = (v[t * stride + j] - sk) * beta[t];
          double o = 0;
          for (int64_t i = 0; i < n; ++i) o += (S[i * n + j] += err * k[t * stride + i]) * q[t * stride + i];
          want[t * n + j] = o * scale;
        }
      }
      for (const OpsKernels* tab : tables()) {
        SCOPED_TRACE(std::string(isa_name(tab->isa)) + " n=" + std::to_string(n) + " m=" + std::to_string(m));
        std::vector<float> state = S0, out(m * stride, -9.f), work(delta_chunk_work(n), std::nanf(""));
        tab->delta_chunk({state.data(), q.data(), k.data(), v.data(), out.data(), stride, stride, beta.data(),
                          log_decay.data(), scale, n, m, work.data()});
        for (int64_t t = 0; t < m; ++t)
          for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(out[t * stride + j], want[t * n + j], 2e-5) << t << "," << j;
        for (int64_t i = 0; i < n * n; ++i) ASSERT_NEAR(state[i], S[i], 2e-5) << i;
        EXPECT_EQ(out[n], -9.f) << "nothing written between rows";
      }
    }
}

// A prompt of 150 tokens chunked (64, 64, then 22) against token by token: the same outputs and
// state within float rounding, continuing from a state; a run shorter than kDeltaChunkMin stays
// token by token, bit for bit.
TEST(DeltaRule, ChunkedMatchesTokenByToken) {
  constexpr int64_t hd = 32, tokens = 150, stride = 2 * hd;
  const auto q = unit_rows(tokens, hd, stride, 70), k = unit_rows(tokens, hd, stride, 71);
  const auto v = uniform_floats(tokens * stride, 72);
  std::vector<DeltaGates> gates;
  for (int64_t t = 0; t < tokens; ++t) gates.push_back(delta_gates(0.3f * std::sin(t), -1.f + 0.02f * t, -0.4f, 0.3f));
  const auto S0 = uniform_floats(hd * hd, 73, -0.2f, 0.2f);
  std::vector<float> s1 = S0, s2 = S0, o1(tokens * stride, 0.f), o2 = o1;
  delta_rule(s1.data(), hd, tokens, q.data(), k.data(), v.data(), stride, stride, gates.data(), 1, o1.data());
  delta_rule(s2.data(), hd, tokens, q.data(), k.data(), v.data(), stride, stride, gates.data(), 1, o2.data(), true);
  double worst = 0, energy = 0;
  for (size_t i = 0; i < o1.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(o1[i] - o2[i])));
    energy += o1[i] * o1[i];
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(energy, 1e-2);
  EXPECT_NE(o1, o2) << "the chunked form must have run (its sums round differently)";
  for (int64_t i = 0; i < hd * hd; ++i) ASSERT_NEAR(s1[i], s2[i], 1e-5) << i;
  std::vector<float> s3 = S0, o3(tokens * stride, 0.f);
  delta_rule(s3.data(), hd, kDeltaChunkMin - 1, q.data(), k.data(), v.data(), stride, stride, gates.data(), 1,
             o3.data(), true);
  std::vector<float> s4 = S0, o4(tokens * stride, 0.f);
  delta_rule(s4.data(), hd, kDeltaChunkMin - 1, q.data(), k.data(), v.data(), stride, stride, gates.data(), 1,
             o4.data());
  EXPECT_EQ(o3, o4);
  EXPECT_EQ(s3, s4);
}

}  // namespace
}  // namespace weft::kernels
