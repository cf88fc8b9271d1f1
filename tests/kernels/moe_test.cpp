// Mixture-of-experts kernels against their scalar references on seeded inputs: routing (top-k of a
// softmax, weights normalised or not, ties), the grouped expert matmuls in several weight types
// and token counts (decode, a few tokens, the GEMM path), and stacks that hold only some experts.
#include "kernels/moe.h"

#include "kernels/quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <vector>

namespace weft::kernels {
namespace {

std::vector<float> normal_values(size_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

TEST(MoeRoute, MatchesReferenceAndPicksTheLargest) {
  for (int64_t n_expert : {8, 60}) {
    for (int64_t k : {1, 2, 8}) {
      for (bool norm : {false, true}) {
        const int64_t n_tokens = 5;
        const auto logits = normal_values(n_tokens * n_expert, static_cast<uint32_t>(n_expert * 10 + k), 2.f);
        std::vector<float> got(n_tokens * 2 * k), want(n_tokens * 2 * k);
        moe_route(logits.data(), n_tokens, n_expert, k, norm, got.data());
        moe_route_ref(logits.data(), n_tokens, n_expert, k, norm, want.data());
        for (int64_t t = 0; t < n_tokens; ++t) {
          const float* g = got.data() + t * 2 * k;
          const float* l = logits.data() + t * n_expert;
          std::set<int64_t> ids;
          double sum = 0;
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(route_id(g, j), route_id(want.data() + t * 2 * k, j));
            EXPECT_NEAR(route_weight(g, k, j), route_weight(want.data() + t * 2 * k, k, j), 1e-6);
            ids.insert(route_id(g, j));
            sum += route_weight(g, k, j);
            if (j > 0) {
              EXPECT_GE(l[route_id(g, j - 1)], l[route_id(g, j)]) << "descending";
            }
          }
          EXPECT_EQ(static_cast<int64_t>(ids.size()), k) << "distinct experts";
          int64_t larger = 0;  // logits above the k-th selected one: none outside the selection
          for (int64_t e = 0; e < n_expert; ++e) larger += l[e] >= l[route_id(g, k - 1)];
          EXPECT_EQ(larger, k);
          if (norm) {
            EXPECT_NEAR(sum, 1.0, 1e-6);
          }
          if (!norm) {
            EXPECT_LT(sum, 1.0 + 1e-6);
          }
        }
      }
    }
  }
}

TEST(MoeRoute, TiesGoToTheLowerIdAndSoftmaxWeights) {
  const std::vector<float> logits{0.f, 1.f, 1.f, 0.f, 1.f};
  std::vector<float> r(4);
  moe_route(logits.data(), 1, 5, 2, false, r.data());
  EXPECT_EQ(route_id(r.data(), 0), 1);
  EXPECT_EQ(route_id(r.data(), 1), 2);
  const double e = std::exp(1.0), z = 3 * e + 2;
  EXPECT_NEAR(route_weight(r.data(), 2, 0), e / z, 1e-6);  // softmax over all five, not renormalised
  moe_route(logits.data(), 1, 5, 2, true, r.data());
  EXPECT_NEAR(route_weight(r.data(), 2, 0), 0.5, 1e-6);
}

// A stack of n_expert random matrices [rows, cols] in type t, and its f32 values.
struct Stack {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
  ExpertStack view(int64_t first, int64_t n, DType t, int64_t rows, int64_t cols) const {
    const size_t stride = row_bytes(t, cols);
    return {{t, bytes.data() + first * rows * stride, n * rows, cols, stride}, first, n, rows};
  }
};

Stack make_stack(DType t, int64_t n_expert, int64_t rows, int64_t cols, uint32_t seed) {
  Stack s;
  const size_t stride = row_bytes(t, cols);
  s.bytes.resize(stride * rows * n_expert);
  s.values.resize(rows * cols * n_expert);
  const auto v = normal_values(s.values.size(), seed, 0.5f);
  for (int64_t r = 0; r < rows * n_expert; ++r) {
    quantize_row_ref(t, v.data() + r * cols, s.bytes.data() + r * stride, cols);
    dequantize_row_ref(t, s.bytes.data() + r * stride, s.values.data() + r * cols, cols);
  }
  return s;
}

// The stack with each expert repacked into panels on its own, as WeightStore stores it; nullopt
// where its experts are not whole panels of a type this CPU has a panel kernel for.
struct PanelStack {
  std::vector<uint8_t> bytes;
  ExpertStack stack;
};
std::optional<PanelStack> panels_of(const ExpertStack& v) {
  WeightMatrix one = v.w;
  one.rows = v.rows;
  if (!can_repack_experts(one)) return std::nullopt;
  PanelStack p;
  const size_t each = repacked_bytes(one);
  p.bytes.resize(each * v.n + 64);
  uint8_t* dst = p.bytes.data() + (64 - reinterpret_cast<uintptr_t>(p.bytes.data()) % 64) % 64;
  for (int64_t e = 0; e < v.n; ++e, one.data += v.rows * v.w.row_stride) repack(one, dst + each * e);
  p.stack = v;
  p.stack.w = {v.w.type, dst, v.w.rows, v.w.cols, row_bytes(v.w.type, v.w.cols), WeightLayout::Panels};
  return p;
}

// Routes of n_tokens tokens, k of n_expert experts each (from seeded logits, like the model's).
std::vector<float> make_routes(int64_t n_tokens, int64_t n_expert, int64_t k, uint32_t seed) {
  const auto logits = normal_values(n_tokens * n_expert, seed);
  std::vector<float> r(n_tokens * 2 * k);
  moe_route_ref(logits.data(), n_tokens, n_expert, k, true, r.data());
  return r;
}

// Quantized activations: within 2% of the largest |output| (see matmul_test's kActQuantRelTol).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  double scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  ASSERT_GT(scale, 0.0) << what << ": outputs must vary";
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], rel * scale) << what << " at " << i;
}

// The same, or exact zeros where nothing was routed to the experts held.
void expect_close_or_zero(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  if (std::any_of(want.begin(), want.end(), [](float v) { return v != 0.f; }))
    return expect_close(got, want, rel, what);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 0.f) << what << " at " << i;
}

struct MatmulCase {
  DType type;
  int64_t cols;
  double rel;
};

class ExpertMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(ExpertMatmul, MatchesReferenceForEveryHolding) {
  const MatmulCase& c = GetParam();
  const int64_t n_expert = 6, k = 2, rows = c.cols;  // down reads rows wide: whole blocks
  const Stack gate = make_stack(c.type, n_expert, rows, c.cols, 1);
  const Stack down = make_stack(c.type, n_expert, c.cols, rows, 2);  // [rows -> cols]
  ThreadPool pool(2);
  MoeScratch scratch;
  int panel_cases = 0;
  // Decode, a few tokens per expert, the GEMM path, and ~32 tokens per expert (AMX where the CPU has it).
  for (int64_t n_tokens : {1, 3, 24, 96}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " tokens " + std::to_string(n_tokens));
    const auto routes = make_routes(n_tokens, n_expert, k, static_cast<uint32_t>(n_tokens));
    const auto x = normal_values(n_tokens * c.cols, 3);
    const auto xs = normal_values(n_tokens * k * rows, 4);
    std::vector<float> full_sum;
    for (auto [first, n] : {std::pair<int64_t, int64_t>{0, n_expert}, {0, 3}, {3, 3}, {5, 1}}) {
      const ExpertStack g = gate.view(first, n, c.type, rows, c.cols);
      std::vector<float> got(n_tokens * k * rows, 7.f), want(n_tokens * k * rows);
      expert_matmul(g, x.data(), routes.data(), k, n_tokens, got.data(), pool, scratch);
      expert_matmul_ref(g, x.data(), routes.data(), k, n_tokens, want.data());
      for (int64_t s = 0; s < n_tokens * k; ++s) {  // slots of experts held elsewhere are zero
        if (g.holds(route_id(routes.data() + s / k * 2 * k, s % k))) continue;
        for (int64_t i = 0; i < rows; ++i) ASSERT_EQ(got[s * rows + i], 0.f);
      }
      if (n == n_expert) expect_close(got, want, c.rel, "expert_matmul");
      if (const auto p = panels_of(g)) {  // the same through the panel kernels (grouped_panels)
        std::vector<float> got_p(got.size(), 7.f);
        expert_matmul(p->stack, x.data(), routes.data(), k, n_tokens, got_p.data(), pool, scratch);
        expect_close_or_zero(got_p, want, c.rel, "expert_matmul on panels");
      }

      const ExpertStack d = down.view(first, n, c.type, c.cols, rows);
      std::vector<float> sum(n_tokens * c.cols, 7.f), sum_ref(n_tokens * c.cols);
      expert_matmul_sum(d, xs.data(), routes.data(), k, n_tokens, sum.data(), pool, scratch);
      expert_matmul_sum_ref(d, xs.data(), routes.data(), k, n_tokens, sum_ref.data());
      if (const auto p = panels_of(d)) {
        std::vector<float> sum_p(sum.size(), 7.f);
        expert_matmul_sum(p->stack, xs.data(), routes.data(), k, n_tokens, sum_p.data(), pool, scratch);
        expect_close_or_zero(sum_p, sum_ref, c.rel, "expert_matmul_sum on panels");
        panel_cases++;
      }
      if (n == n_expert) {
        expect_close(sum, sum_ref, c.rel, "expert_matmul_sum");
        full_sum = sum;
      } else if (first == 0) {
        // Expert split: the halves' partial sums add up to the whole stack's.
        const ExpertStack rest = down.view(3, 3, c.type, c.cols, rows);
        std::vector<float> other(n_tokens * c.cols);
        expert_matmul_sum(rest, xs.data(), routes.data(), k, n_tokens, other.data(), pool, scratch);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
        expect_close(sum, full_sum, 1e-5, "halves");
      }
    }
  }
  WeightMatrix one = gate.view(0, 1, c.type, rows, c.cols).w;
  if (can_repack_experts(one)) {
    EXPECT_EQ(panel_cases, 4 * 4) << "every holding on panels, at every token count";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ExpertMatmul,
                         ::testing::Values(MatmulCase{DType::F32, 64, 1e-5}, MatmulCase{DType::F16, 64, 1e-3},
                                           MatmulCase{DType::Q8_0, 64, 2e-2}, MatmulCase{DType::Q4_0, 64, 2e-2},
                                           MatmulCase{DType::Q4_1, 64, 2e-2}, MatmulCase{DType::Q4_K, 256, 2e-2},
                                           MatmulCase{DType::Q6_K, 256, 2e-2}),
                         [](const auto& p) { return std::string(dtype_name(p.param.type)); });

TEST(SigmoidScale, MatchesReferenceInPlace) {
  const int64_t n_tokens = 3, n = 37;
  auto x = normal_values(n_tokens * n, 5);
  const auto g = normal_values(n_tokens, 6, 3.f);
  std::vector<float> want(x.size());
  sigmoid_scale_ref(x.data(), g.data(), want.data(), n_tokens, n);
  sigmoid_scale(x.data(), g.data(), x.data(), n_tokens, n);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-6 * std::abs(want[i]) + 1e-7);
}

}  // namespace
}  // namespace weft::kernels
