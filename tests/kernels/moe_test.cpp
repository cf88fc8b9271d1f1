// Mixture-of-experts kernels against their scalar references on seeded inputs: routing (top-k of a
// softmax, weights normalised or not, ties), the grouped expert matmuls in several weight types
// and token counts (decode, a few tokens, the GEMM path), and stacks that hold only some experts.
#include "kernels/moe.h"

#include "kernels/fixed_point.h"
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
      for (auto [norm, selected] : {std::pair{false, false}, {true, false}, {false, true}}) {
        SCOPED_TRACE(testing::Message() << n_expert << " experts, k " << k << (norm ? ", norm" : "")
                                        << (selected ? ", softmax of the selected" : ""));
        const int64_t n_tokens = 5;
        const auto logits = normal_values(n_tokens * n_expert, static_cast<uint32_t>(n_expert * 10 + k), 2.f);
        std::vector<float> got(n_tokens * 2 * k), want(n_tokens * 2 * k);
        const MoeRouting routing{n_expert, k, norm, selected};
        moe_route(logits.data(), n_tokens, routing, got.data());
        moe_route_ref(logits.data(), n_tokens, routing, want.data());
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
          if (norm || selected) {
            EXPECT_NEAR(sum, 1.0, 1e-6);
          } else {
            EXPECT_LT(sum, 1.0 + 1e-6);
          }
        }
      }
    }
  }
}

// DeepSeek V3's routing, against a direct reading of its reference (modeling_deepseek.py's
// noaux_tc): sigmoid scores; groups ranked by the sum of their two best biased scores; the top k
// biased scores within the best groups; weights the unbiased scores, renormalised, then scaled.
TEST(MoeRoute, SigmoidScoresWithSelectionBiasOverGroups) {
  const int64_t n_expert = 16, k = 3, n_groups = 4, used = 2, per = n_expert / n_groups, n_tokens = 40;
  const auto logits = normal_values(n_tokens * n_expert, 5, 1.5f);
  const auto bias = normal_values(n_expert, 6, 0.3f);
  MoeRouting r{n_expert, k, true, false};
  r.sigmoid = true;
  r.selection_bias = bias.data();
  r.n_groups = n_groups;
  r.n_groups_used = used;
  r.weights_scale = 2.5f;
  std::vector<float> got(n_tokens * 2 * k);
  moe_route(logits.data(), n_tokens, r, got.data());
  int64_t bias_changed = 0, groups_changed = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<double> p(n_expert), sel(n_expert);
    for (int64_t e = 0; e < n_expert; ++e) {
      p[e] = 1 / (1 + std::exp(-static_cast<double>(logits[t * n_expert + e])));
      sel[e] = p[e] + bias[e];
    }
    std::vector<std::pair<double, int64_t>> groups;
    for (int64_t g = 0; g < n_groups; ++g) {
      std::vector<double> x(sel.begin() + g * per, sel.begin() + (g + 1) * per);
      std::sort(x.rbegin(), x.rend());
      groups.push_back({-(x[0] + x[1]), g});
    }
    std::sort(groups.begin(), groups.end());
    std::vector<int64_t> order;
    for (int64_t u = 0; u < used; ++u)
      for (int64_t e = groups[u].second * per; e < (groups[u].second + 1) * per; ++e) order.push_back(e);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sel[a] > sel[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(route_id(got.data() + t * 2 * k, j), order[j]) << "token " << t << " slot " << j;
      EXPECT_NEAR(route_weight(got.data() + t * 2 * k, k, j), 2.5 * p[order[j]] / sum, 1e-5);
    }
    // The inputs must exercise both rules: the plain top k of the scores differs from it.
    std::vector<int64_t> by_p(n_expert), by_sel(n_expert);
    std::iota(by_p.begin(), by_p.end(), 0);
    std::iota(by_sel.begin(), by_sel.end(), 0);
    std::sort(by_p.begin(), by_p.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::sort(by_sel.begin(), by_sel.end(), [&](int64_t a, int64_t b) { return sel[a] > sel[b]; });
    bias_changed += !std::equal(by_p.begin(), by_p.begin() + k, by_sel.begin());
    groups_changed += !std::equal(by_sel.begin(), by_sel.begin() + k, order.begin());
  }
  EXPECT_GT(bias_changed, 0);
  EXPECT_GT(groups_changed, 0);
}

TEST(MoeRoute, TiesGoToTheLowerIdAndSoftmaxWeights) {
  const std::vector<float> logits{0.f, 1.f, 1.f, 0.f, 1.f};
  std::vector<float> r(4);
  moe_route(logits.data(), 1, {5, 2, false}, r.data());
  EXPECT_EQ(route_id(r.data(), 0), 1);
  EXPECT_EQ(route_id(r.data(), 1), 2);
  const double e = std::exp(1.0), z = 3 * e + 2;
  EXPECT_NEAR(route_weight(r.data(), 2, 0), e / z, 1e-6);  // softmax over all five, not renormalised
  moe_route(logits.data(), 1, {5, 2, true}, r.data());
  EXPECT_NEAR(route_weight(r.data(), 2, 0), 0.5, 1e-6);
}

TEST(MoeRoute, SoftmaxOverTheSelectedLogits) {  // gpt-oss: the top k logits, then their softmax
  const std::vector<float> logits{0.5f, 3.f, -1.f, 2.f, 2.5f};
  std::vector<float> r(4);
  moe_route(logits.data(), 1, {5, 2, false, true}, r.data());
  EXPECT_EQ(route_id(r.data(), 0), 1);
  EXPECT_EQ(route_id(r.data(), 1), 4);
  const double w0 = 1 / (1 + std::exp(2.5 - 3.0));
  EXPECT_NEAR(route_weight(r.data(), 2, 0), w0, 1e-6);
  EXPECT_NEAR(route_weight(r.data(), 2, 1), 1 - w0, 1e-6);
}

// Gemma 4: each selected expert's weight, after the renormalisation, times its expert's scale; the
// selection itself unchanged.
TEST(MoeRoute, ExpertScalesMultiplyTheFinalWeights) {
  const std::vector<float> logits{0.5f, 3.f, -1.f, 2.f, 2.5f}, scale{1.f, 0.25f, 8.f, 2.f, 3.f};
  std::vector<float> plain(4), scaled(4);
  moe_route(logits.data(), 1, {5, 2, true}, plain.data());
  moe_route(logits.data(), 1, {5, 2, true, false, scale.data()}, scaled.data());
  for (int j = 0; j < 2; ++j) {
    EXPECT_EQ(route_id(scaled.data(), j), route_id(plain.data(), j));
    EXPECT_FLOAT_EQ(route_weight(scaled.data(), 2, j),
                    route_weight(plain.data(), 2, j) * scale[route_id(plain.data(), j)]);
  }
  EXPECT_EQ(route_id(scaled.data(), 0), 1);  // the largest logit, not the largest scaled weight
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
  moe_route_ref(logits.data(), n_tokens, {n_expert, k, true}, r.data());
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
    // Biases (gpt-oss's experts) at two of the token counts, through the row and the panel paths.
    const bool biased = n_tokens == 1 || n_tokens == 24;
    const auto gate_bias = normal_values(n_expert * rows, 12), down_bias = normal_values(n_expert * c.cols, 13);
    std::vector<float> full_sum;
    for (auto [first, n] : {std::pair<int64_t, int64_t>{0, n_expert}, {0, 3}, {3, 3}, {5, 1}}) {
      ExpertStack g = gate.view(first, n, c.type, rows, c.cols);
      if (biased) g.bias = gate_bias.data() + first * rows;
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

      ExpertStack d = down.view(first, n, c.type, c.cols, rows);
      if (biased) d.bias = down_bias.data() + first * c.cols;
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
        ExpertStack rest = down.view(3, 3, c.type, c.cols, rows);
        if (biased) rest.bias = down_bias.data() + 3 * c.cols;
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
                                           MatmulCase{DType::Q6_K, 256, 2e-2}, MatmulCase{DType::MXFP4, 64, 2e-2}),
                         [](const auto& p) { return std::string(dtype_name(p.param.type)); });

// DeepSeek's heads' matrices: each head's product of the first w.cols features of its own input
// head, for a device holding some of the heads, in rows and on panels, decode to prompts; the
// same bits whichever heads a device holds with it (a split's heads give one device's results).
TEST_P(ExpertMatmul, HeadMatmulMatchesEachHeadsReference) {
  const MatmulCase& c = GetParam();
  const int64_t n_head = 6, rows = 32, in_head = c.cols + 16;  // reads the first cols of each head
  const Stack heads = make_stack(c.type, n_head, rows, c.cols, 31);
  ThreadPool pool(2);
  MoeScratch scratch;
  for (int64_t n_tokens : {1, 5, 40}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)) + " tokens " + std::to_string(n_tokens));
    const auto x = normal_values(n_tokens * n_head * in_head, 32);
    std::vector<float> whole(n_tokens * n_head * rows);
    for (auto [first, n] : {std::pair<int64_t, int64_t>{0, n_head}, {2, 3}, {5, 1}}) {
      const ExpertStack v = heads.view(first, n, c.type, rows, c.cols);
      const int64_t ldx = n_head * in_head;
      const float* xs = x.data() + first * in_head;  // this device's heads of each token
      std::vector<float> want(n_tokens * n * rows);
      for (int64_t h = 0; h < n; ++h)
        matmul_ref(v.expert(first + h), xs + h * in_head, ldx, n_tokens, want.data() + h * rows, n * rows);
      std::optional<PanelStack> p = panels_of(v);
      for (const ExpertStack* st : {&v, p ? &p->stack : static_cast<const ExpertStack*>(nullptr)}) {
        if (!st) continue;
        std::vector<float> got(want.size(), 7.f);
        head_matmul(*st, xs, ldx, in_head, n_tokens, got.data(), pool, scratch);
        expect_close(got, want, c.rel, st == &v ? "head_matmul" : "head_matmul on panels");
        if (st != &v) continue;
        if (n == n_head) {
          whole = got;
        } else {
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t h = 0; h < n; ++h)
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(got[(t * n + h) * rows + r], whole[(t * n_head + first + h) * rows + r]) << "bit for bit";
        }
      }
    }
  }
}

// Columns [c0, c1) of every row of a stack (on block boundaries): what a tensor split's device
// holds of each expert's down.
Stack column_slice(const Stack& s, DType t, int64_t n_rows, int64_t cols, int64_t c0, int64_t c1) {
  Stack out;
  const size_t stride = row_bytes(t, cols), b0 = row_bytes(t, c0), b1 = row_bytes(t, c1);
  for (int64_t r = 0; r < n_rows; ++r)
    out.bytes.insert(out.bytes.end(), s.bytes.begin() + r * stride + b0, s.bytes.begin() + r * stride + b1);
  return out;
}

struct FixedCase {
  DType type;
  int64_t granule, n_granules;
  double rel;
};

class ExpertSumFixed : public ::testing::TestWithParam<FixedCase> {};

// --exact's expert sum: the integers of the whole stack equal those of devices holding some
// experts (expert split) or some granules of every expert (tensor split), added, with and without
// a bias, in rows and in panels; and they are the weighted sum, within the type's tolerance.
TEST_P(ExpertSumFixed, SplitsAddUpToTheWholeStacksIntegers) {
  const FixedCase& c = GetParam();
  const int64_t n_expert = 6, k = 2, rows = 64, cols = c.granule * c.n_granules, cut = c.granule;
  const Stack down = make_stack(c.type, n_expert, rows, cols, 21);
  const Stack left = column_slice(down, c.type, n_expert * rows, cols, 0, cut);
  const Stack right = column_slice(down, c.type, n_expert * rows, cols, cut, cols);
  const auto bias = normal_values(n_expert * rows, 22);
  ThreadPool pool(2);
  MoeScratch scratch;
  for (int64_t n_tokens : {1, 3, 24}) {
    for (bool biased : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(c.type)) + " tokens " + std::to_string(n_tokens) + (biased ? " bias" : ""));
      const auto routes = make_routes(n_tokens, n_expert, k, static_cast<uint32_t>(n_tokens + 40));
      const auto x = normal_values(n_tokens * k * cols, 23);
      std::vector<float> x_left, x_right;  // each slot's features of the two column halves
      for (int64_t slot = 0; slot < n_tokens * k; ++slot) {
        x_left.insert(x_left.end(), x.begin() + slot * cols, x.begin() + slot * cols + cut);
        x_right.insert(x_right.end(), x.begin() + slot * cols + cut, x.begin() + (slot + 1) * cols);
      }
      auto with_bias = [&](ExpertStack st, bool on) {
        if (on) st.bias = bias.data() + st.first * rows;
        return st;
      };
      const ExpertStack whole = with_bias(down.view(0, n_expert, c.type, rows, cols), biased);
      const ExpertStack ex_a = with_bias(down.view(0, 2, c.type, rows, cols), biased);
      const ExpertStack ex_b = with_bias(down.view(2, 4, c.type, rows, cols), biased);
      const ExpertStack col_a = with_bias(left.view(0, n_expert, c.type, rows, cut), biased);  // the bias once
      const ExpertStack col_b = right.view(0, n_expert, c.type, rows, cols - cut);
      auto sum = [&](const ExpertStack& st, const std::vector<float>& xs) {
        std::vector<int64_t> acc(n_tokens * rows, 0);
        expert_matmul_sum_fixed(st, xs.data(), routes.data(), k, n_tokens, c.granule, acc.data(), pool, scratch);
        return acc;
      };
      auto add = [](std::vector<int64_t> a, const std::vector<int64_t>& b) {
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = static_cast<int64_t>(static_cast<uint64_t>(a[i]) + static_cast<uint64_t>(b[i]));
        return a;
      };
      const auto want = sum(whole, x);
      EXPECT_EQ(add(sum(ex_a, x), sum(ex_b, x)), want) << "expert split";
      EXPECT_EQ(add(sum(col_a, x_left), sum(col_b, x_right)), want) << "tensor split";
      std::vector<float> got(want.size()), ref(want.size());
      fixed_to_f32(want.data(), got.data(), static_cast<int64_t>(got.size()));
      expert_matmul_sum_ref(whole, x.data(), routes.data(), k, n_tokens, ref.data());
      expect_close(got, ref, c.rel, "fixed sum");
      const auto pw = panels_of(whole), pa = panels_of(col_a), pb = panels_of(col_b);
      if (pw && pa && pb) {  // panels: their own bits, alike for the whole and the split
        const auto want_p = sum(pw->stack, x);
        EXPECT_EQ(add(sum(pa->stack, x_left), sum(pb->stack, x_right)), want_p) << "tensor split on panels";
        fixed_to_f32(want_p.data(), got.data(), static_cast<int64_t>(got.size()));
        expect_close(got, ref, c.rel, "fixed sum on panels");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, ExpertSumFixed,
                         ::testing::Values(FixedCase{DType::F32, 4, 3, 1e-5}, FixedCase{DType::Q8_0, 32, 3, 2e-2},
                                           FixedCase{DType::Q4_K, 256, 2, 2e-2}),
                         [](const auto& p) { return std::string(dtype_name(p.param.type)); });

// gpt-oss's MXFP4 experts (2880 x 2880, both ways) repack on their own wherever a SIMD level runs, whole
// and as a tensor split cuts them (half the rows of gate / up, half the columns of down): a panel is
// 17 bytes x 16 rows per block, so an expert's panels end on 64 bytes only when panels x blocks is a
// multiple of 4.
TEST(ExpertStack, GptOssMxfp4ExpertsRepack) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no SIMD level: no panels";
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2880, 2880}, {1440, 2880}, {2880, 1440}})
    EXPECT_TRUE(can_repack_experts({DType::MXFP4, nullptr, rows, cols, row_bytes(DType::MXFP4, cols)}))
        << rows << " x " << cols;
}

// Each held expert's bias is added to its rows: zero matrices give the routed experts' biases
// (gate/up), and the routes' weighted sum of them (down).
TEST(ExpertBias, AddsTheRoutedExpertsBias) {
  const int64_t n_expert = 4, k = 2, rows = 8, cols = 32, n_tokens = 3;
  const std::vector<float> zeros(n_expert * rows * cols, 0.f);
  const auto bias = normal_values(n_expert * rows, 9);
  const auto routes = make_routes(n_tokens, n_expert, k, 10);
  const auto x = normal_values(n_tokens * k * cols, 11);
  ThreadPool pool(2);
  MoeScratch scratch;
  for (auto [first, n] : {std::pair<int64_t, int64_t>{0, n_expert}, {1, 2}}) {
    ExpertStack w{{DType::F32, reinterpret_cast<const uint8_t*>(zeros.data()), n * rows, cols, cols * sizeof(float)},
                  first,
                  n,
                  rows,
                  bias.data() + first * rows};
    std::vector<float> y(n_tokens * k * rows), sum(n_tokens * rows), sum_ref(n_tokens * rows);
    expert_matmul(w, x.data(), routes.data(), k, n_tokens, y.data(), pool, scratch);
    ExpertStack down = w;
    down.w.cols = cols;
    expert_matmul_sum(down, x.data(), routes.data(), k, n_tokens, sum.data(), pool, scratch);
    expert_matmul_sum_ref(down, x.data(), routes.data(), k, n_tokens, sum_ref.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* rt = routes.data() + t * 2 * k;
      for (int64_t i = 0; i < rows; ++i) {
        double want_sum = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t e = route_id(rt, j);
          const float want = w.holds(e) ? bias[e * rows + i] : 0.f;
          EXPECT_EQ(y[(t * k + j) * rows + i], want) << "token " << t << " slot " << j;
          if (w.holds(e)) want_sum += route_weight(rt, k, j) * bias[e * rows + i];
        }
        EXPECT_NEAR(sum[t * rows + i], want_sum, 1e-6);
        EXPECT_NEAR(sum_ref[t * rows + i], want_sum, 1e-6);
      }
    }
  }
}

TEST(SigmoidScale, MatchesReferenceInPlace) {
  const int64_t n_tokens = 3, n = 37;
  auto x = normal_values(n_tokens * n, 5);
  const auto g = normal_values(n_tokens, 6, 3.f);
  std::vector<float> want(x.size());
  sigmoid_scale_ref(x.data(), g.data(), want.data(), n_tokens, n);
  sigmoid_scale(x.data(), g.data(), x.data(), n_tokens, n);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-6 * std::abs(want[i]) + 1e-7);
}

TEST(SigmoidScale, EachValuesOwnGateMatchesReference) {
  const int64_t n_tokens = 3, n = 37;
  const auto x = normal_values(n_tokens * n, 7);
  const auto g = normal_values(n_tokens * n, 8, 3.f);
  std::vector<float> want(x.size()), got(x.size());
  sigmoid_scale_ref(x.data(), g.data(), want.data(), n_tokens, n, n);
  sigmoid_scale(x.data(), g.data(), got.data(), n_tokens, n, n);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]) + 1e-7) << i;
  // Not the per-token gate: the first value's gate alone would give another row.
  std::vector<float> per_token(x.size());
  sigmoid_scale_ref(x.data(), g.data(), per_token.data(), n_tokens, n);
  EXPECT_NE(per_token, want);
}

}  // namespace
}  // namespace weft::kernels
