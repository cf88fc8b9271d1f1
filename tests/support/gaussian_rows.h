// Test rows for the quantized kernels: Gaussian values with a few outliers (every 97th value six
// times larger), as real weight rows have; the outliers stress the quantizers' scale fits.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace weft::test_support {

inline std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  for (int64_t i = 0; i < n; i += 97) v[i] *= 6.0f;
  return v;
}

}  // namespace weft::test_support
