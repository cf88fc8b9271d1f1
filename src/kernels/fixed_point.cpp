// Every level rounds alike: the float widened to double (exact), times 2^32 (exact), clamped, then
// rounded to the nearest integer, ties to even; back, the integer to the nearest double, times
// 2^-32, to the nearest float. So the levels give the same integers and the same floats.
#include "kernels/fixed_point.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/isa.h"

#include <cmath>

namespace weft::kernels {
namespace {

constexpr double kScale = 0x1p32;
constexpr double kUnscale = 0x1p-32;
constexpr double kLimit = 0x1p62;  // kScale * 2^30
// Below 2^51 in magnitude, adding 1.5 * 2^52 leaves round(d) in the low mantissa bits (AVX2 has
// no double <-> int64 conversion).
constexpr double kMagic = 0x1.8p52;
constexpr double kMagicRange = 0x1p51;

// The clamp as maxpd / minpd compute it: a NaN d gives -kLimit.
inline double clamped(double d) {
  d = d > -kLimit ? d : -kLimit;
  return d < kLimit ? d : kLimit;
}

inline uint64_t wrap_add(int64_t a, int64_t b) { return static_cast<uint64_t>(a) + static_cast<uint64_t>(b); }

void add_fixed_ref(const float* x, int64_t* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<int64_t>(wrap_add(acc[i], to_fixed(x[i])));
}
void from_fixed_ref(const int64_t* acc, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = from_fixed(acc[i]);
}

// ---- AVX2: four values a step, through doubles ----

WEFT_TARGET_AVX2 inline __m256i fixed4_avx2(const float* x) {
  __m256d d = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(x)), _mm256_set1_pd(kScale));
  d = _mm256_min_pd(_mm256_max_pd(d, _mm256_set1_pd(-kLimit)), _mm256_set1_pd(kLimit));
  const __m256d mag = _mm256_andnot_pd(_mm256_set1_pd(-0.0), d);
  if (_mm256_movemask_pd(_mm256_cmp_pd(mag, _mm256_set1_pd(kMagicRange), _CMP_LT_OQ)) != 0xF) {
    alignas(32) double v[4];
    _mm256_store_pd(v, d);
    return _mm256_setr_epi64x(std::llrint(v[0]), std::llrint(v[1]), std::llrint(v[2]), std::llrint(v[3]));
  }
  const __m256d magic = _mm256_set1_pd(kMagic);
  return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(d, magic)), _mm256_castpd_si256(magic));
}

WEFT_TARGET_AVX2 void add_fixed_avx2(const float* x, int64_t* acc, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    auto* a = reinterpret_cast<__m256i*>(acc + i);
    _mm256_storeu_si256(a, _mm256_add_epi64(_mm256_loadu_si256(a), fixed4_avx2(x + i)));
  }
  add_fixed_ref(x + i, acc + i, n - i);
}
WEFT_TARGET_AVX2 void from_fixed_avx2(const int64_t* acc, float* y, int64_t n) {
  int64_t i = 0;
  const __m256d magic = _mm256_set1_pd(kMagic);
  const __m256i magic_bits = _mm256_castpd_si256(magic);
  const __m256i range = _mm256_set1_epi64x(static_cast<int64_t>(kMagicRange));
  for (; i + 4 <= n; i += 4) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    // |v| < 2^51: v - range and -v - range both negative.
    const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi64(v, _mm256_sub_epi64(range, _mm256_set1_epi64x(1))),
                                        _mm256_cmpgt_epi64(_mm256_sub_epi64(_mm256_set1_epi64x(1), range), v));
    if (!_mm256_testz_si256(out, out)) {
      from_fixed_ref(acc + i, y + i, 4);
      continue;
    }
    const __m256d d = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(v, magic_bits)), magic);
    _mm_storeu_ps(y + i, _mm256_cvtpd_ps(_mm256_mul_pd(d, _mm256_set1_pd(kUnscale))));
  }
  from_fixed_ref(acc + i, y + i, n - i);
}

// ---- AVX-512: eight values a step, with AVX-512DQ's double <-> int64 conversions ----

WEFT_TARGET_AVX512 inline __m512i fixed8_avx512(const float* x) {
  __m512d d = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x)), _mm512_set1_pd(kScale));
  d = _mm512_min_pd(_mm512_max_pd(d, _mm512_set1_pd(-kLimit)), _mm512_set1_pd(kLimit));
  return _mm512_cvt_roundpd_epi64(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

WEFT_TARGET_AVX512 void add_fixed_avx512(const float* x, int64_t* acc, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm512_storeu_si512(acc + i, _mm512_add_epi64(_mm512_loadu_si512(acc + i), fixed8_avx512(x + i)));
  add_fixed_ref(x + i, acc + i, n - i);
}
WEFT_TARGET_AVX512 void from_fixed_avx512(const int64_t* acc, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d d =
        _mm512_cvt_roundepi64_pd(_mm512_loadu_si512(acc + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(_mm512_mul_pd(d, _mm512_set1_pd(kUnscale))));
  }
  from_fixed_ref(acc + i, y + i, n - i);
}

}  // namespace

int64_t to_fixed(float v) { return std::llrint(clamped(static_cast<double>(v) * kScale)); }
float from_fixed(int64_t v) { return static_cast<float>(static_cast<double>(v) * kUnscale); }

AddFixedFn add_fixed_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::Avx512: return add_fixed_avx512;
    case Isa::Avx2: return add_fixed_avx2;
    default: return add_fixed_ref;
  }
}
FixedToF32Fn fixed_to_f32_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::Avx512: return from_fixed_avx512;
    case Isa::Avx2: return from_fixed_avx2;
    default: return from_fixed_ref;
  }
}

void add_fixed(const float* x, int64_t* acc, int64_t n) {
  static const AddFixedFn f = add_fixed_for(detected_isa());
  f(x, acc, n);
}
void add_fixed_sums(const int64_t* x, int64_t* acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<int64_t>(wrap_add(acc[i], x[i]));
}

void fixed_to_f32(const int64_t* acc, float* y, int64_t n) {
  static const FixedToF32Fn f = fixed_to_f32_for(detected_isa());
  f(acc, y, n);
}

}  // namespace weft::kernels
