// f32 -> Q2_K / Q3_K / Q4_K / Q5_K / Q6_K (scalar; quantizing weights happens once, off the hot path).
//
// Two levels, as in ggml: first each sub-block gets a float scale (and min) fitted to its values,
// then those floats are themselves quantized to 6 bits (Q4_K/Q5_K) or int8 (Q6_K) against one fp16
// super-scale, and the values are re-rounded against the scales actually stored.
#include "core/error.h"
#include "kernels/kquants_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace weft::kernels::kquants {

namespace {

// Candidate inverse scales tried around the plain range fit: nmax / range scaled by
// 1 + k * kStep for k in [-kSteps, kSteps]. A plain max-min fit wastes levels when one outlier
// sets the range; the small search plus a least-squares refit recovers most of that.
constexpr int kSteps = 10;
constexpr float kStep = 0.01f;

inline int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// Fits x[i] ~ scale * L[i] - offset with integer L[i] in [0, nmax], scale >= 0, offset >= 0
// (the offset only ever lowers values: Q4_K/Q5_K store it as a positive min), minimizing
// sum w[i] * err^2. Returns scale, writes L and offset.
float fit_scale_offset(const float* x, const float* w, int n, int nmax, uint8_t* L, float* offset) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) {  // all values equal and <= 0: the offset alone represents them
    std::fill(L, L + n, uint8_t{0});
    *offset = -lo;
    return 0.0f;
  }
  float best_err = INFINITY, best_scale = 0.0f, best_offset = -lo;
  uint8_t cand[32];
  WEFT_ASSERT(n <= 32);
  std::fill(L, L + n, uint8_t{0});
  for (int k = -kSteps; k <= kSteps; ++k) {
    const float iscale = nmax * (1.0f + k * kStep) / (hi - lo);
    double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      cand[i] = static_cast<uint8_t>(round_clamp(iscale * (x[i] - lo), 0, nmax));
      const double l = cand[i];
      sw += w[i];
      sl += w[i] * l;
      sll += w[i] * l * l;
      sx += w[i] * x[i];
      slx += w[i] * l * x[i];
    }
    // Weighted least squares for x ~ a * l + b with these levels; b must stay <= 0.
    const double det = sw * sll - sl * sl;
    double a = 0, b = 0;
    if (det > 0) {
      a = (sw * slx - sl * sx) / det;
      b = (sll * sx - sl * slx) / det;
    }
    if (b > 0 || det <= 0) {
      b = 0;
      a = sll > 0 ? slx / sll : 0;
    }
    if (a < 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = a * cand[i] + b - x[i];
      err += w[i] * e * e;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      best_scale = static_cast<float>(a);
      best_offset = static_cast<float>(-b);
      std::copy(cand, cand + n, L);
    }
  }
  *offset = best_offset;
  return best_scale;
}

// Fits x[i] ~ scale * L[i] with L[i] in [-nmax, nmax - 1] (scale may be negative, so the lone
// extra negative level lands on the value of largest magnitude). Weights w. Returns scale.
float fit_scale_symmetric(const float* x, const float* w, int n, int nmax) {
  float amax = 0.0f, vmax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  if (amax == 0.0f) return 0.0f;
  float best_score = -1.0f, best_scale = 0.0f;
  for (int k = -kSteps; k <= kSteps; ++k) {
    const float iscale = -nmax * (1.0f + k * kStep) / vmax;
    double slx = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      const double l = round_clamp(iscale * x[i], -nmax, nmax - 1);
      slx += w[i] * l * x[i];
      sll += w[i] * l * l;
    }
    // With the LS scale slx / sll the error is sum w x^2 - slx^2 / sll: maximize the latter.
    if (sll > 0 && slx * slx / sll > best_score) {
      best_score = static_cast<float>(slx * slx / sll);
      best_scale = static_cast<float>(slx / sll);
    }
  }
  return best_scale;
}

// Weights of the sub-block fits: |x| plus the block's RMS, so large values matter more but small
// ones are not ignored (the importance-free weighting ggml uses for these types).
void fit_weights(const float* x, int n_block, float* w) {
  double sum_x2 = 0;
  for (int i = 0; i < n_block; ++i) sum_x2 += static_cast<double>(x[i]) * x[i];
  const float rms = static_cast<float>(std::sqrt(sum_x2 / n_block));
  for (int i = 0; i < n_block; ++i) w[i] = rms + std::fabs(x[i]);
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with levels [0, nmax]; writes d, dmin, scales and
// the final levels L[256].
void quantize_block_scale_min(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales_out,
                              uint8_t* L) {
  float w[kQK], scale[8], offset[8];
  fit_weights(x, kQK, w);
  float max_scale = 0.0f, max_offset = 0.0f;
  for (int j = 0; j < 8; ++j) {
    scale[j] = fit_scale_offset(x + 32 * j, w + 32 * j, 32, nmax, L + 32 * j, &offset[j]);
    max_scale = std::max(max_scale, scale[j]);
    max_offset = std::max(max_offset, offset[j]);
  }
  // Sub-block scales and mins as 6-bit multiples of d = max / 63 and dmin = max / 63.
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_offset = max_offset > 0 ? 63.0f / max_offset : 0.0f;
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(round_clamp(inv_scale * scale[j], 0, 63));
    m[j] = static_cast<uint8_t>(round_clamp(inv_offset * offset[j], 0, 63));
  }
  *d_out = f32_to_fp16(max_scale / 63.0f);
  *dmin_out = f32_to_fp16(max_offset / 63.0f);
  pack_scales_mins(sc, m, scales_out);
  // Re-round every value against the scale and min as stored (fp16 d times the 6-bit integer).
  const float d = fp16_to_f32(*d_out), dmin = fp16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * sc[j], ml = dmin * m[j];
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = dl > 0 ? static_cast<uint8_t>(round_clamp((x[32 * j + l] + ml) / dl, 0, nmax)) : 0;
  }
}

// Q6_K and Q3_K: each of a super-block's 16 sub-blocks of x gets a symmetric scale for levels
// [-nmax, nmax - 1] (weights x^2: a symmetric fit has no min to protect small values, so favour
// large ones). Returns the scale of largest magnitude, with its sign (0 for an all-zero block).
float fit_symmetric_sub_blocks(const float* x, int nmax, float* scale) {
  float w[kQK];
  for (int e = 0; e < kQK; ++e) w[e] = x[e] * x[e];
  float max_abs_scale = 0.0f, max_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scale[j] = fit_scale_symmetric(x + 16 * j, w + 16 * j, 16, nmax);
    if (std::fabs(scale[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scale[j]);
      max_scale = scale[j];
    }
  }
  return max_scale;
}

int64_t n_blocks(int64_t n) {
  WEFT_ASSERT(n >= 0 && n % kQK == 0);
  return n / kQK;
}

}  // namespace

void quantize_row_q4_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    uint8_t L[kQK];
    quantize_block_scale_min(src + i * kQK, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_row_q5_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    uint8_t L[kQK];
    quantize_block_scale_min(src + i * kQK, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
  }
}

void quantize_row_q2_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ2K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float* x = src + i * kQK;
    float w[kQK], scale[16], offset[16];
    uint8_t L[kQK];
    fit_weights(x, kQK, w);
    float max_scale = 0.0f, max_offset = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = fit_scale_offset(x + 16 * j, w + 16 * j, 16, 3, L + 16 * j, &offset[j]);
      max_scale = std::max(max_scale, scale[j]);
      max_offset = std::max(max_offset, offset[j]);
    }
    // 4-bit sub-block scales and mins against d = max / 15 and dmin = max / 15.
    const float inv_scale = max_scale > 0 ? 15.0f / max_scale : 0.0f;
    const float inv_offset = max_offset > 0 ? 15.0f / max_offset : 0.0f;
    y[i].d = f32_to_fp16(max_scale / 15.0f);
    y[i].dmin = f32_to_fp16(max_offset / 15.0f);
    const float d = fp16_to_f32(y[i].d), dmin = fp16_to_f32(y[i].dmin);
    std::memset(y[i].qs, 0, sizeof(y[i].qs));
    for (int j = 0; j < 16; ++j) {
      const int sc = round_clamp(inv_scale * scale[j], 0, 15), m = round_clamp(inv_offset * offset[j], 0, 15);
      y[i].scales[j] = static_cast<uint8_t>(sc | (m << 4));
      const float dl = d * sc, ml = dmin * m;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        put_q2_level(y[i].qs, e, dl > 0 ? round_clamp((x[e] + ml) / dl, 0, 3) : 0);
      }
    }
  }
}

void quantize_row_q3_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ3K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float* x = src + i * kQK;
    float scale[16];
    const float max_scale = fit_symmetric_sub_blocks(x, 4, scale);
    // 6-bit signed sub-block scales against d = max_scale / -32: the largest uses the -32 level.
    std::memset(&y[i], 0, sizeof(BlockQ3K));
    int8_t sc[16] = {};
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      y[i].d = f32_to_fp16(1.0f / iscale);
      for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(round_clamp(iscale * scale[j], -32, 31));
    }
    pack_q3_scales(sc, y[i].scales);
    const float d = fp16_to_f32(y[i].d);
    for (int e = 0; e < kQK; ++e) {
      const float dl = d * sc[e / 16];
      const int q = (dl != 0.0f ? round_clamp(x[e] / dl, -4, 3) : 0) + 4;  // [0, 7]
      put_q2_level(y[i].qs, e, q);
      put_q3_third_bit(y[i].hmask, e, q >> 2);
    }
  }
}

void quantize_row_q6_K_ref(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6K*>(dst);
  for (int64_t i = 0; i < n_blocks(n); ++i) {
    const float* x = src + i * kQK;
    float scale[16];
    const float max_scale = fit_symmetric_sub_blocks(x, 32, scale);
    // int8 sub-block scales against d = max_scale / -128, so the largest one uses the -128 level.
    std::memset(&y[i], 0, sizeof(BlockQ6K));
    if (max_scale == 0.0f) {
      for (int l = 0; l < 64; ++l) y[i].qh[l] = 0xaa;  // every q = 32, i.e. value 0
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y[i].d = f32_to_fp16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<int8_t>(round_clamp(iscale * scale[j], -128, 127));
    const float d = fp16_to_f32(y[i].d);
    for (int e = 0; e < kQK; ++e) {
      const int h = e / 128, p = (e % 128) / 32, l = e % 32;
      const float dl = d * y[i].scales[8 * h + 2 * p + l / 16];
      const int q = (dl != 0.0f ? round_clamp(x[e] / dl, -32, 31) : 0) + 32;
      y[i].ql[64 * h + l + 32 * (p & 1)] |= static_cast<uint8_t>((q & 0x0f) << (p < 2 ? 0 : 4));
      y[i].qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * p));
    }
  }
}

}  // namespace weft::kernels::kquants
