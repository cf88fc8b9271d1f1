// IQ4_NL / IQ4_XS / MXFP4: scalar references, quantizers, the scalar table and the entry points of
// iquants.h.
#include "kernels/iquants.h"

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/iquants_impl.h"
#include "kernels/kquants.h"
#include "kernels/kquants_impl.h"
#include "kernels/quants_legacy.h"
#include "kernels/rows_dot.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace weft::kernels::iquants {

namespace {

using kquants::BlockQ8K;
using legacy::BlockQ8_0;

// Values 0..15 and 16..31 of a 32-value run of paired nibbles, as levels of grid.
void grid_levels(const int8_t* grid, const uint8_t* qs, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    out[j] = grid[qs[j] & 0xF];
    out[j + 16] = grid[qs[j] >> 4];
  }
}

// IQ4_NL and MXFP4: a scale and 32 grid levels per block.
template <class Block>
void dequantize_row_grid32_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const Block*>(src);
  int8_t q[kQK4NL];
  for (int64_t i = 0; i < n / kQK4NL; ++i, dst += kQK4NL) {
    const float d = block_scale(b[i]);
    grid_levels(kLevels<kBlockType<Block>>, b[i].qs, q);
    for (int j = 0; j < kQK4NL; ++j) dst[j] = d * q[j];
  }
}

void dequantize_row_iq4_xs_ref(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4XS*>(src);
  int8_t q[32];
  for (int64_t i = 0; i < n / kQKXS; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int ib = 0; ib < kQKXS / 32; ++ib, dst += 32) {
      const float dl = d * static_cast<float>(iq4xs_scale(b[i], ib) - 32);
      grid_levels(kGrid, b[i].qs + 16 * ib, q);
      for (int j = 0; j < 32; ++j) dst[j] = dl * q[j];
    }
  }
}

// Integer dot of a 32-value run of paired nibbles (levels of grid) with 32 int8 activations.
int32_t grid_dot(const int8_t* grid, const uint8_t* qs, const int8_t* a) {
  int8_t q[32];
  grid_levels(grid, qs, q);
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += q[j] * a[j];
  return s;
}

template <class Block>
float vec_dot_grid32_q8_0_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK4NL; ++i)
    sum += block_scale(x[i]) * fp16_to_f32(y[i].d) *
           static_cast<float>(grid_dot(kLevels<kBlockType<Block>>, x[i].qs, y[i].qs));
  return sum;
}

float vec_dot_iq4_xs_q8_K_ref(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4XS*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float sum = 0;
  for (int64_t i = 0; i < n / kQKXS; ++i) {
    int32_t sumi = 0;  // |sumi| <= 8 x 32 x 32 x 127 x 127: exact in int32
    for (int ib = 0; ib < kQKXS / 32; ++ib)
      sumi += (iq4xs_scale(x[i], ib) - 32) * grid_dot(kGrid, x[i].qs + 16 * ib, y[i].qs + 32 * ib);
    sum += fp16_to_f32(x[i].d) * y[i].d * static_cast<float>(sumi);
  }
  return sum;
}

// Midpoints between neighbouring grid levels: the nearest level to v is the count of those below it
// (a tie goes to the lower level).
constexpr std::array<float, 15> kMidpoints = [] {
  std::array<float, 15> m{};
  for (int k = 0; k < 15; ++k) m[k] = 0.5f * static_cast<float>(kGrid[k] + kGrid[k + 1]);
  return m;
}();

// idx[i] = the grid index nearest v[i], i < n (branch-free, so it vectorizes over i: the quantizer
// runs it for every candidate scale).
void nearest_levels(const float* v, int n, uint8_t* idx) {
  for (int i = 0; i < n; ++i) idx[i] = 0;
  for (float mid : kMidpoints)
    for (int i = 0; i < n; ++i) idx[i] = static_cast<uint8_t>(idx[i] + (v[i] > mid ? 1 : 0));
}

// The value of largest magnitude in x[0..n), with its sign (0 when all are 0).
float signed_max(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  return max;
}

// Least-squares scale of x[0..n) on the grid, indices in idx. Candidates map the value of largest
// magnitude to levels around the grid's end of largest magnitude (-127); for each, every value
// takes its nearest level and the scale is refitted to that choice; the best fit wins.
float fit_grid(const float* x, int n, uint8_t* idx) {
  const float max = signed_max(x, n);
  if (max == 0) {
    for (int i = 0; i < n; ++i) idx[i] = 8;  // level 1 times a zero scale
    return 0;
  }
  constexpr int kTries = 8;  // end levels -127 - 8 .. -127 + 8
  float best_score = -1, best_d = 0;
  uint8_t trial[kQKXS];
  float scaled[kQKXS];
  for (int t = -kTries; t <= kTries; ++t) {
    const float inv = (static_cast<float>(kGrid[0]) + static_cast<float>(t)) / max;
    for (int i = 0; i < n; ++i) scaled[i] = x[i] * inv;
    nearest_levels(scaled, n, trial);
    double sumqx = 0, sumq2 = 0;
    for (int i = 0; i < n; ++i) {
      const double q = kGrid[trial[i]];
      sumqx += q * x[i];
      sumq2 += q * q;
    }
    // Error of the refitted scale: sum x^2 - sumqx^2 / sumq2, so the largest sumqx^2 / sumq2 wins.
    const double score = sumq2 > 0 ? sumqx * sumqx / sumq2 : 0;
    if (score > best_score) {
      best_score = static_cast<float>(score);
      best_d = static_cast<float>(sumqx / sumq2);
      for (int i = 0; i < n; ++i) idx[i] = trial[i];
    }
  }
  return best_d;
}

// The indices of x[0..n) at scale d as stored (level 1 x 0 for a zero scale).
void requantize(const float* x, int n, float d, uint8_t* idx) {
  float scaled[kQKXS];
  for (int i = 0; i < n; ++i) scaled[i] = d != 0 ? x[i] / d : 0.f;
  nearest_levels(scaled, n, idx);
}

// Indices of a 32-value run as paired nibbles.
void put_nibbles(const uint8_t* idx, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(idx[j] | idx[j + 16] << 4);
}

void quantize_row_iq4_nl_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4NL*>(dst);
  uint8_t idx[kQK4NL];
  for (int64_t i = 0; i < n / kQK4NL; ++i, src += kQK4NL) {
    const float d = fit_grid(src, kQK4NL, idx);
    b[i].d = f32_to_fp16(d);
    // Refit the levels to the scale as stored (fp16).
    const float ds = fp16_to_f32(b[i].d);
    if (ds != 0) requantize(src, kQK4NL, ds, idx);
    put_nibbles(idx, b[i].qs);
  }
}

// ggml's best_index_mxfp4: the nibble whose level times d is nearest x (ties to the lower nibble, so
// zero is nibble 0).
uint8_t nearest_mxfp4(float x, float d) {
  uint8_t best = 0;
  float best_err = std::fabs(kGridMxfp4[0] * d - x);
  for (uint8_t i = 1; i < 16; ++i) {
    const float err = std::fabs(kGridMxfp4[i] * d - x);
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

// ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127, so that d = 2^(e - 128) puts amax
// at 8 .. 16 d, the grid's top level 12 d (the larger magnitudes are clipped to it, as the OCP
// spec's rule has it). floor(log2) is taken exactly (ilogb; ggml's floorf(log2f) can round up
// just below a power of two), and e clamped to the byte (ggml's cast is undefined past it; ilogb of
// an infinity is INT_MAX, clamped before the sum).
void quantize_row_mxfp4_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockMXFP4*>(dst);
  uint8_t idx[kQK4NL];
  for (int64_t i = 0; i < n / kQK4NL; ++i, src += kQK4NL) {
    float amax = 0;
    for (int j = 0; j < kQK4NL; ++j) amax = std::max(amax, std::fabs(src[j]));
    const int e = amax > 0 ? std::clamp(std::ilogb(amax), 2 - 127, 255 + 2 - 127) - 2 + 127 : 0;
    b[i].e = static_cast<uint8_t>(e);
    const float d = e8m0_half(b[i].e);
    for (int j = 0; j < kQK4NL; ++j) idx[j] = nearest_mxfp4(src[j], d);
    put_nibbles(idx, b[i].qs);
  }
}

void quantize_row_iq4_xs_ref(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4XS*>(dst);
  uint8_t idx[32];
  for (int64_t i = 0; i < n / kQKXS; ++i, src += kQKXS) {
    BlockIQ4XS& o = b[i];
    float scale[kQKXS / 32];
    for (int ib = 0; ib < kQKXS / 32; ++ib) scale[ib] = fit_grid(src + 32 * ib, 32, idx);
    // Sub-block scales as d * l, l in [-32, 31]: the largest maps to -32.
    const float max = signed_max(scale, kQKXS / 32);
    o.d = f32_to_fp16(max / -32.f);
    const float d = fp16_to_f32(o.d);
    o.scales_h = 0;
    for (auto& s : o.scales_l) s = 0;
    for (int ib = 0; ib < kQKXS / 32; ++ib) {
      int l = d != 0 ? static_cast<int>(std::lround(scale[ib] / d)) : 0;
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      const int ls = l + 32;
      o.scales_l[ib / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (ib % 2)));
      o.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * ib));
      const float dl = d * static_cast<float>(l);
      requantize(src + 32 * ib, 32, dl, idx);
      put_nibbles(idx, o.qs + 16 * ib);
    }
  }
}

}  // namespace

bool handles(DType t) { return t == DType::IQ4_NL || t == DType::IQ4_XS || t == DType::MXFP4; }

void dequantize_ref(DType t, const void* src, float* dst, int64_t n) {
  if (t == DType::IQ4_NL) return dequantize_row_grid32_ref<BlockIQ4NL>(src, dst, n);
  if (t == DType::IQ4_XS) return dequantize_row_iq4_xs_ref(src, dst, n);
  if (t == DType::MXFP4) return dequantize_row_grid32_ref<BlockMXFP4>(src, dst, n);
  fail("iquants", "type {} is not a grid type", dtype_name(t));
}

void quantize_ref(DType t, const float* src, void* dst, int64_t n) {
  if (t == DType::IQ4_NL) return quantize_row_iq4_nl_ref(src, dst, n);
  if (t == DType::IQ4_XS) return quantize_row_iq4_xs_ref(src, dst, n);
  if (t == DType::MXFP4) return quantize_row_mxfp4_ref(src, dst, n);
  fail("iquants", "type {} is not a grid type", dtype_name(t));
}

float vec_dot_ref(DType t, int64_t n, const void* w, const void* a) {
  if (t == DType::IQ4_NL) return vec_dot_grid32_q8_0_ref<BlockIQ4NL>(n, w, a);
  if (t == DType::IQ4_XS) return vec_dot_iq4_xs_q8_K_ref(n, w, a);
  if (t == DType::MXFP4) return vec_dot_grid32_q8_0_ref<BlockMXFP4>(n, w, a);
  fail("iquants", "type {} is not a grid type", dtype_name(t));
}

template <Isa I>
std::array<TypeKernels, 3> make_table(DotKernels iq4_nl, DotKernels iq4_xs, DotKernels mxfp4) {
  const TypeKernels* q8_0 = find_type(legacy::table<I>(), DType::Q4_0);  // its activations: Q8_0
  const TypeKernels* q8_k = find_type(kquants::table<I>(), DType::Q4_K);
  WEFT_ASSERT(q8_0 && q8_k);
  return {
      {{DType::IQ4_NL, DType::Q8_0, dequantize_row_grid32_ref<BlockIQ4NL>, q8_0->quantize_act, iq4_nl.vec_dot,
        iq4_nl.rows_dot, I},
       {DType::IQ4_XS, DType::Q8_K, dequantize_row_iq4_xs_ref, q8_k->quantize_act, iq4_xs.vec_dot, iq4_xs.rows_dot, I},
       {DType::MXFP4, DType::Q8_0, dequantize_row_grid32_ref<BlockMXFP4>, q8_0->quantize_act, mxfp4.vec_dot,
        mxfp4.rows_dot, I}}};
}
template std::array<TypeKernels, 3> make_table<Isa::Scalar>(DotKernels, DotKernels, DotKernels);
template std::array<TypeKernels, 3> make_table<Isa::Avx2>(DotKernels, DotKernels, DotKernels);
template std::array<TypeKernels, 3> make_table<Isa::Avx512>(DotKernels, DotKernels, DotKernels);

template <>
TypeTable table<Isa::Scalar>() {
  constexpr VecDotFn kNl = vec_dot_grid32_q8_0_ref<BlockIQ4NL>, kXs = vec_dot_iq4_xs_q8_K_ref,
                     kMx = vec_dot_grid32_q8_0_ref<BlockMXFP4>;
  static const std::array<TypeKernels, 3> kTable =
      make_table<Isa::Scalar>({kNl, rows_dot_each<kNl>}, {kXs, rows_dot_each<kXs>}, {kMx, rows_dot_each<kMx>});
  return kTable;
}

}  // namespace weft::kernels::iquants
