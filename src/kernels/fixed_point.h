// Fixed-point sums: a reduction cut into granules adds each granule's float partial as an integer,
// so its result does not depend on which device computed which granule, nor on the order the
// partials arrive in (exact inference, issue 40). Integer sums are associative; float sums are not.
#pragma once

#include "kernels/isa.h"

#include <cstdint>

namespace weft::kernels {

// A value v is held as round(v * 2^kFixedShift), ties to even, in an int64: 2^-32 ~ 2.3e-10 of
// absolute resolution. |v| is clamped to 2^30 first (NaN counts as -2^30), so that a sum of any
// number of partials wraps (two's complement, well defined on uint64) back to the exact result
// wherever that result itself lies within +-2^31.
inline constexpr int kFixedShift = 32;

int64_t to_fixed(float v);
float from_fixed(int64_t v);  // the nearest float to v / 2^kFixedShift, through double

// acc[i] += to_fixed(x[i]) for i < n (wrapping).
void add_fixed(const float* x, int64_t* acc, int64_t n);
// acc[i] += x[i] for i < n: sums already in fixed point (wrapping).
void add_fixed_sums(const int64_t* x, int64_t* acc, int64_t n);
// y[i] = from_fixed(acc[i]).
void fixed_to_f32(const int64_t* acc, float* y, int64_t n);

// The two at one ISA level (the ones above are the best level's), for tests: every level gives the
// same bits. nullptr where this CPU cannot run the level.
using AddFixedFn = void (*)(const float* x, int64_t* acc, int64_t n);
using FixedToF32Fn = void (*)(const int64_t* acc, float* y, int64_t n);
AddFixedFn add_fixed_for(Isa isa);
FixedToF32Fn fixed_to_f32_for(Isa isa);

}  // namespace weft::kernels
