// Fixed-point sums (exact inference, issue 40): the rounding rule, every ISA level's bits, and
// matmul_prepared_fixed's contract: the column slices of a matrix, each multiplied on its own and
// added as integers, give the bits of the whole matrix, for every type, layout and token count.
#include "kernels/fixed_point.h"

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace weft::kernels {
namespace {

TEST(FixedPoint, RoundsToNearestEvenAndClamps) {
  EXPECT_EQ(to_fixed(1.f), int64_t{1} << 32);
  EXPECT_EQ(to_fixed(-0.25f), -(int64_t{1} << 30));
  EXPECT_EQ(to_fixed(0x1p-33f), 0);                // a tie goes to the even neighbour
  EXPECT_EQ(to_fixed(0x1.8p-32f), 2);              // 1.5 -> 2
  EXPECT_EQ(to_fixed(-0x1.8p-32f), -2);            // -1.5 -> -2
  EXPECT_EQ(to_fixed(0x1.4p-32f), 1);              // 1.25 -> 1
  EXPECT_EQ(to_fixed(0x1p31f), int64_t{1} << 62);  // clamped at 2^30
  EXPECT_EQ(to_fixed(-INFINITY), -(int64_t{1} << 62));
  EXPECT_EQ(to_fixed(std::numeric_limits<float>::quiet_NaN()), -(int64_t{1} << 62));
  EXPECT_EQ(from_fixed(int64_t{3} << 31), 1.5f);
  EXPECT_EQ(from_fixed(to_fixed(0.1f)), 0.1f);
}

// Values over the whole range each level treats apart (AVX2's fast path below 2^19), tails of
// every length: every level gives the reference's integers and floats.
TEST(FixedPoint, EveryLevelGivesTheSameBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> expo(-40.f, 34.f), sign(-1.f, 1.f);
  std::vector<float> x(1000);
  for (float& v : x) v = std::copysign(std::exp2(expo(rng)), sign(rng));
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[7] = 0.f;
  std::vector<int64_t> ints(x.size());
  for (size_t i = 0; i < x.size(); ++i) ints[i] = static_cast<int64_t>(rng()) << (rng() % 33) ^ rng();
  int tried = 0;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    const AddFixedFn add = add_fixed_for(isa);
    const FixedToF32Fn back = fixed_to_f32_for(isa);
    if (!add) continue;
    ++tried;
    SCOPED_TRACE(isa_name(isa));
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{9}, int64_t{17}, int64_t{1000}}) {
      std::vector<int64_t> acc(ints.begin(), ints.begin() + n);
      add(x.data(), acc.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(acc[i], static_cast<int64_t>(static_cast<uint64_t>(ints[i]) + static_cast<uint64_t>(to_fixed(x[i]))))
            << i << " " << x[i];
      std::vector<float> y(n);
      back(ints.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], from_fixed(ints[i])) << i << " " << ints[i];
    }
  }
  EXPECT_GE(tried, 2);
}

// A matrix of `type` quantized from normal values, in ggml rows.
struct Matrix {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  WeightMatrix rows_view(int64_t k0, int64_t k1) const {
    return {type, bytes.data() + row_bytes(type, k0), rows, k1 - k0, row_bytes(type, cols)};
  }
};

Matrix make_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m{t, rows, cols, std::vector<uint8_t>(row_bytes(t, cols) * rows)};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.5f);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    quantize_row_ref(t, row.data(), m.bytes.data() + r * row_bytes(t, cols), cols);
  }
  return m;
}

// w as the engine holds it: rows, or copied into panels where the type has them.
struct Held {
  std::unique_ptr<uint8_t[], void (*)(void*)> buf{nullptr, std::free};
  WeightMatrix w;
};
Held hold(const WeightMatrix& rows, bool panels) {
  Held h;
  h.w = rows;
  if (panels && can_repack(rows)) {
    h.buf.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (repacked_bytes(rows) + 63) / 64 * 64)));
    h.w = repack(rows, h.buf.get());
  }
  return h;
}

std::vector<int64_t> fixed_product(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens,
                                   int64_t granule, ThreadPool& pool) {
  MatmulScratch scratch;
  std::vector<int64_t> acc(static_cast<size_t>(w.rows * n_tokens), 0);
  prepare_activations(w, x, ldx, n_tokens, pool, scratch);
  matmul_prepared_fixed(w, x, ldx, n_tokens, granule, acc.data(), w.rows, pool, scratch);
  return acc;
}

TEST(MatmulFixed, ColumnSlicesAddUpToTheWholeBitForBit) {
  constexpr DType kAll[] = {DType::F32,  DType::F16,    DType::BF16,   DType::Q4_0, DType::Q4_1, DType::Q5_0,
                            DType::Q5_1, DType::Q8_0,   DType::Q2_K,   DType::Q3_K, DType::Q4_K, DType::Q5_K,
                            DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
  ThreadPool pool(2, {}, /*spin=*/false);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  struct Shape {
    int64_t granule, cols, cut1, cut2;
  };
  for (DType t : kAll) {
    const int64_t g = block_size(t) == 256 ? 256 : 64;
    // Four whole granules; and granules narrower than a vector with a short last one (a float FFN
    // 172 wide in granules of 8, as the planner cuts stories260K's).
    std::vector<Shape> shapes{{g, 4 * g, g, 3 * g}};
    if (block_size(t) == 1) shapes.push_back({8, 172, 88, 128});
    for (const Shape& shape : shapes) {
      const int64_t granule = shape.granule;
      const int64_t rows = 40, cols = shape.cols;  // 40: a panel and a half
      const Matrix m = make_matrix(t, rows, cols, 3);
      for (bool panels : {false, true})
        for (int64_t n_tokens : {1, 2, 3, 8, 19}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + (panels ? " panels" : " rows") + " tokens " +
                       std::to_string(n_tokens));
          const int64_t ldx = cols + 5;
          std::vector<float> x(static_cast<size_t>(ldx * n_tokens));
          for (float& v : x) v = normal(rng);
          const Held whole = hold(m.rows_view(0, cols), panels);
          const std::vector<int64_t> want = fixed_product(whole.w, x.data(), ldx, n_tokens, granule, pool);
          // Near the float product (so not garbage that happens to add up).
          std::vector<float> y(static_cast<size_t>(rows * n_tokens));
          matmul(whole.w, x.data(), ldx, n_tokens, y.data(), rows, pool, *std::make_unique<MatmulScratch>());
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(from_fixed(want[i]), y[i], 1e-3f * (1.f + std::fabs(y[i]))) << i;
          for (int64_t cut : {shape.cut1, shape.cut2}) {
            const Held a = hold(m.rows_view(0, cut), panels), b = hold(m.rows_view(cut, cols), panels);
            std::vector<int64_t> got = fixed_product(a.w, x.data(), ldx, n_tokens, granule, pool);
            const std::vector<int64_t> rest = fixed_product(b.w, x.data() + cut, ldx, n_tokens, granule, pool);
            for (size_t i = 0; i < got.size(); ++i)
              got[i] = static_cast<int64_t>(static_cast<uint64_t>(got[i]) + static_cast<uint64_t>(rest[i]));
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(int64_t))) << "cut at " << cut;
          }
        }
    }
  }
}

}  // namespace
}  // namespace weft::kernels
