// matmul against two references: the composition of the scalar kernels (quantize activations,
// vec_dot_ref), which it must match to summation order, and matmul_ref (f32 activations, double
// accumulation), which it must match up to the activation quantization error.
#include "kernels/matmul.h"

#include "core/error.h"
#include "kernels/quants.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace weft::kernels {
namespace {

constexpr DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                            DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};

constexpr double kSummationRelTol = 2e-5;  // of sum |w_i a_i|: f32 vs double summation order
// Q8 activations: each element off by at most half a step, amax / 254, so the product is off
// by at most sum |w_i| amax / 254 <= sum |w_i| |x_i| ... bounded loosely by 1% of sum |w_i x_i|
// for inputs without tiny-valued blocks.
constexpr double kActQuantRelTol = 1e-2;

struct Problem {
  DType type;
  int64_t rows, cols, n_tokens, ldx, ldy;
  size_t row_stride;
  std::vector<uint8_t> w;
  std::vector<float> wf;  // dequantized weights, [rows, cols]
  std::vector<float> x;   // [n_tokens, ldx]

  WeightMatrix matrix() const { return {type, w.data(), rows, cols, row_stride}; }
};

Problem make_problem(DType t, int64_t rows, int64_t cols, int64_t n_tokens, uint32_t seed) {
  Problem p{t, rows, cols, n_tokens, cols + 3, rows + 5, row_bytes(t, cols) + 8, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  p.w.assign(p.row_stride * rows, 0);
  p.wf.resize(rows * cols);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = normal(rng) * 0.5f;
    quantize_row_ref(t, row.data(), p.w.data() + r * p.row_stride, cols);
    dequantize_row_ref(t, p.w.data() + r * p.row_stride, p.wf.data() + r * cols, cols);
  }
  p.x.assign(p.ldx * n_tokens, std::numeric_limits<float>::quiet_NaN());  // padding must not be read
  for (int64_t tk = 0; tk < n_tokens; ++tk)
    for (int64_t i = 0; i < cols; ++i) p.x[tk * p.ldx + i] = normal(rng);
  return p;
}

double abs_dot(const Problem& p, int64_t r, int64_t tk) {
  double s = 0;
  for (int64_t i = 0; i < p.cols; ++i) s += std::fabs(static_cast<double>(p.wf[r * p.cols + i]) * p.x[tk * p.ldx + i]);
  return s;
}

void check(const Problem& p, ThreadPool& pool, MatmulScratch& scratch) {
  SCOPED_TRACE(std::string(dtype_name(p.type)) + " rows=" + std::to_string(p.rows) + " cols=" + std::to_string(p.cols) +
               " tokens=" + std::to_string(p.n_tokens) + " threads=" + std::to_string(pool.size()));
  const float sentinel = -1234.5f;
  std::vector<float> y(p.ldy * p.n_tokens, sentinel), y_ref(p.ldy * p.n_tokens, sentinel);
  matmul(p.matrix(), p.x.data(), p.ldx, p.n_tokens, y.data(), p.ldy, pool, scratch);
  matmul_ref(p.matrix(), p.x.data(), p.ldx, p.n_tokens, y_ref.data(), p.ldy);

  const DType at = vec_dot_type(p.type);
  std::vector<uint8_t> act(row_bytes(at, p.cols));
  int64_t failures = 0;
  for (int64_t tk = 0; tk < p.n_tokens; ++tk) {
    quantize_row_ref(at, p.x.data() + tk * p.ldx, act.data(), p.cols);
    for (int64_t r = 0; r < p.ldy; ++r) {
      const float got = y[tk * p.ldy + r];
      if (r >= p.rows) {  // ldy padding stays untouched
        failures += got != sentinel;
        continue;
      }
      const double scale = abs_dot(p, r, tk);
      const double composed = vec_dot_ref(p.type, p.cols, p.w.data() + r * p.row_stride, act.data());
      const double act_tol = at == DType::F32 ? kSummationRelTol : kActQuantRelTol;
      const bool ok = std::fabs(got - composed) <= kSummationRelTol * scale &&
                      std::fabs(got - y_ref[tk * p.ldy + r]) <= act_tol * scale;
      if (!ok && failures++ < 5)
        ADD_FAILURE() << "token " << tk << " row " << r << ": got " << got << ", kernels " << composed
                      << ", matmul_ref " << y_ref[tk * p.ldy + r] << ", scale " << scale;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_NE(y[0], y[1]) << "outputs do not vary";
}

TEST(Matmul, MatchesReferencesForEveryTypeTokenCountAndThreadCount) {
  MatmulScratch scratch;  // shared across calls of different shapes, as the engine does
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads, {}, /*spin=*/false);
    for (DType t : kTypes)
      for (int64_t n_tokens : {1, 3, 17}) {
        // 67 rows: not a multiple of the 16-row chunks, 4-row passes or any tile.
        const Problem p = make_problem(t, 67, 32 * 9, n_tokens, 1000 + static_cast<uint32_t>(n_tokens));
        check(p, pool, scratch);
      }
  }
}

TEST(Matmul, PromptTilesCoverEveryRowAndToken) {
  // Rows of 4096 Q4_0 values (2304 bytes) make several weight tiles per thread; 70 tokens make
  // two token tiles.
  ThreadPool pool(2, {}, /*spin=*/false);
  MatmulScratch scratch;
  check(make_problem(DType::Q4_0, 100, 4096, 70, 7), pool, scratch);
  check(make_problem(DType::F16, 37, 640, 70, 8), pool, scratch);
}

// One prepare_activations serves several matmul_prepared of one layout (Q, K, V), and a fused
// producer writes x as it goes: both give exactly what matmul gives on the finished x.
TEST(Matmul, PreparedOnceWithAProducerEqualsMatmul) {
  ThreadPool pool(2, {}, /*spin=*/false);
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16})
    for (int64_t n_tokens : {1, 9}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " tokens=" + std::to_string(n_tokens));
      const Problem a = make_problem(t, 40, 256, n_tokens, 11), b = make_problem(t, 24, 256, n_tokens, 12);
      ASSERT_EQ(activation_layout(a.matrix(), n_tokens), activation_layout(b.matrix(), n_tokens));
      MatmulScratch s1, s2;
      std::vector<float> ya(a.ldy * n_tokens), yb(b.ldy * n_tokens), ya_ref(ya.size()), yb_ref(yb.size());
      matmul(a.matrix(), a.x.data(), a.ldx, n_tokens, ya_ref.data(), a.ldy, pool, s1);
      matmul(b.matrix(), a.x.data(), a.ldx, n_tokens, yb_ref.data(), b.ldy, pool, s1);

      std::vector<float> x(a.x.size(), 0.f);  // written by the producer, row by row
      prepare_activations(a.matrix(), x.data(), a.ldx, n_tokens, pool, s2, [&](int64_t tk) {
        std::memcpy(x.data() + tk * a.ldx, a.x.data() + tk * a.ldx, a.cols * sizeof(float));
      });
      matmul_prepared(a.matrix(), x.data(), a.ldx, n_tokens, ya.data(), a.ldy, pool, s2);
      matmul_prepared(b.matrix(), x.data(), a.ldx, n_tokens, yb.data(), b.ldy, pool, s2);
      for (int64_t tk = 0; tk < n_tokens; ++tk) {
        for (int64_t r = 0; r < a.rows; ++r) ASSERT_EQ(ya[tk * a.ldy + r], ya_ref[tk * a.ldy + r]) << tk << "," << r;
        for (int64_t r = 0; r < b.rows; ++r) ASSERT_EQ(yb[tk * b.ldy + r], yb_ref[tk * b.ldy + r]) << tk << "," << r;
      }
    }
}

TEST(Matmul, EmptyAndInvalidShapes) {
  ThreadPool pool(2, {}, false);
  MatmulScratch scratch;
  Problem p = make_problem(DType::Q8_0, 8, 64, 1, 3);
  std::vector<float> y(8, 5.f);
  WeightMatrix m = p.matrix();
  matmul(m, p.x.data(), p.ldx, 0, y.data(), 8, pool, scratch);  // no tokens: nothing written
  EXPECT_EQ(y[0], 5.f);
  m.cols = 48;  // not a multiple of the block size
  EXPECT_ERROR(matmul(m, p.x.data(), p.ldx, 1, y.data(), 8, pool, scratch), "w.cols % block_size(w.type) == 0 failed");
  m = p.matrix();
  m.row_stride = 10;  // shorter than a row
  EXPECT_ERROR(matmul(m, p.x.data(), p.ldx, 1, y.data(), 8, pool, scratch),
               "w.row_stride >= row_bytes(w.type, w.cols) failed");
}

}  // namespace
}  // namespace weft::kernels
