// WeightStore: every slice kind gives the kernels exactly the bytes of that part of the tensor,
// whether it is copied (the default: onto huge pages) or read from the file mapping (--mmap).
#include "device/cpu/cpu_weights.h"

#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "kernels/quants.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace weft::device {
namespace {

using Kind = parallel::WeightSlice::Kind;

constexpr int64_t kRows = 40, kCols = 96;  // Q8_0: 3 blocks of 32 per row

std::unique_ptr<gguf::File> one_tensor_file() {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(kRows * kCols);
  for (float& x : v) x = nd(rng);
  const size_t rb = row_bytes(DType::Q8_0, kCols);
  std::vector<uint8_t> q(rb * kRows);
  for (int64_t r = 0; r < kRows; ++r)
    kernels::quantize_row_ref(DType::Q8_0, v.data() + r * kCols, q.data() + r * rb, kCols);
  gguf::Writer w;
  w.add_tensor("w", DType::Q8_0, {kCols, kRows}, std::move(q));
  static std::vector<uint8_t> bytes;  // the File points into them
  bytes = w.to_bytes();
  return gguf::File::parse(bytes.data(), bytes.size(), "test");
}

// Element (r, c) of a matrix as the kernels see it.
float at(const kernels::WeightMatrix& m, int64_t r, int64_t c) {
  std::vector<float> row(m.cols);
  kernels::dequantize_row_ref(m.type, m.data + r * m.row_stride, row.data(), m.cols);
  return row[c];
}

class WeightStoreTest : public testing::TestWithParam<bool> {};  // map_weights

TEST_P(WeightStoreTest, EverySliceKindHoldsItsPartOfTheTensor) {
  const auto f = one_tensor_file();
  WeightStore reference(-1, true);
  const kernels::WeightMatrix full = reference.matrix(*f, {"w", Kind::Whole, {}}, WeightStore::Use::Stream);
  ASSERT_EQ(full.data, f->tensor("w").data);  // mapped: zero copy

  WeightStore store(-1, GetParam());
  const auto all = store.matrix(*f, {"w", Kind::Whole, {}}, WeightStore::Use::Stream);
  const auto rows = store.matrix(*f, {"w", Kind::Rows, {8, 29}}, WeightStore::Use::Stream);
  const auto cols = store.matrix(*f, {"w", Kind::Cols, {32, 96}}, WeightStore::Use::Stream);
  const auto table =
      store.matrix(*f, {"w", Kind::Whole, {}}, WeightStore::Use::Lookup);  // a lookup table: never copied
  EXPECT_EQ(table.data, f->tensor("w").data);
  EXPECT_EQ(all.data == f->tensor("w").data, GetParam());
  ASSERT_EQ(rows.rows, 21);
  ASSERT_EQ(cols.cols, 64);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      ASSERT_EQ(at(all, r, c), at(full, r, c)) << r << "," << c;
      if (r >= 8 && r < 29) {
        ASSERT_EQ(at(rows, r - 8, c), at(full, r, c)) << r << "," << c;
      }
      if (c >= 32) {
        ASSERT_EQ(at(cols, r, c - 32), at(full, r, c)) << r << "," << c;
      }
    }
}

TEST_P(WeightStoreTest, CopiesAreAlignedAndCounted) {
  const auto f = one_tensor_file();
  WeightStore store(-1, GetParam());
  const auto cols = store.matrix(*f, {"w", Kind::Cols, {0, 64}}, WeightStore::Use::Stream);
  const auto rows = store.matrix(*f, {"w", Kind::Rows, {1, 2}}, WeightStore::Use::Stream);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cols.data) % 64, 0u);
  const uint64_t col_bytes = row_bytes(DType::Q8_0, 64) * kRows;
  EXPECT_EQ(store.copied_bytes(), col_bytes + (GetParam() ? 0 : row_bytes(DType::Q8_0, kCols)));
  if (!GetParam()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(rows.data) % 64, 0u);
  }
}

TEST(WeightStore, WithoutRoomForCopiesRowsStayMappedAndColumnsAreStillCopied) {
  const auto f = one_tensor_file();
  WeightStore store(-1, false, false, /*reserve_bytes=*/uint64_t{1} << 62);  // more than any machine has
  const auto rows = store.matrix(*f, {"w", Kind::Rows, {8, 29}}, WeightStore::Use::Stream);
  const auto cols = store.matrix(*f, {"w", Kind::Cols, {32, 96}}, WeightStore::Use::Stream);
  EXPECT_EQ(rows.data, f->tensor("w").data + 8 * row_bytes(DType::Q8_0, kCols));
  EXPECT_NE(cols.data, nullptr);
  EXPECT_EQ(store.copied_bytes(), row_bytes(DType::Q8_0, 64) * kRows);
}

TEST(WeightStore, ColumnSliceOffBlockBoundaryIsAnError) {
  const auto f = one_tensor_file();
  WeightStore store(-1, false);
  EXPECT_ERROR(store.matrix(*f, {"w", Kind::Cols, {16, 96}}, WeightStore::Use::Stream),
               "column slice [16, 96) of 'w' is not on");
}

INSTANTIATE_TEST_SUITE_P(Copy, WeightStoreTest, testing::Values(false));
INSTANTIATE_TEST_SUITE_P(Mapped, WeightStoreTest, testing::Values(true));

}  // namespace
}  // namespace weft::device
