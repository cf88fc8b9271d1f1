// Test inputs: n floats uniform in [lo, hi), the same for the same seed.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace weft::test_support {

inline std::vector<float> uniform_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace weft::test_support
