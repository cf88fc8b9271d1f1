#include "parallel/group.h"

#include <cstring>

namespace weft::parallel {

void Group::all_reduce_sum_exact(int64_t* data, size_t n) {
  constexpr size_t kFloatsPerValue = sizeof(int64_t) / sizeof(float);
  static_assert(kFloatsPerValue * sizeof(float) == sizeof(int64_t));
  const auto ranks = static_cast<size_t>(size());
  thread_local std::vector<float> mine, all;
  mine.resize(n * kFloatsPerValue);
  all.resize(n * kFloatsPerValue * ranks);
  if (n > 0) std::memcpy(mine.data(), data, n * sizeof(int64_t));
  all_gather(mine.data(), std::vector<size_t>(ranks, n * kFloatsPerValue), all.data());
  for (size_t i = 0; i < n; ++i) {
    uint64_t sum = 0;
    for (size_t r = 0; r < ranks; ++r) {
      uint64_t v;
      std::memcpy(&v, all.data() + (r * n + i) * kFloatsPerValue, sizeof v);
      sum += v;
    }
    data[i] = static_cast<int64_t>(sum);
  }
}

}  // namespace weft::parallel
