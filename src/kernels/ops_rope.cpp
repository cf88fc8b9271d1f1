// Rotary position embedding, normal (GPT-J / llama: pairs (2i, 2i+1)) and NeoX (pairs (i, i + n_rot/2))
// styles, with linear, llama3, LongRoPE and YaRN frequency scaling. Pair i of a token at position pos
// turns by
//   theta_i = pos * freq_scale * freq_base^(-2i/n_rot) / freq_factor_i
// (YaRN: a mix of that and the unscaled angle, pair_cos_sin).
// Angles are computed in double: at positions in the tens of thousands a float angle is off by
// ~1e-3 rad, which is more than the rest of the op's error put together.
#include "core/error.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace weft::kernels {

namespace {

void check_params(int64_t head_dim, const int32_t* pos, const RopeParams& p) {
  WEFT_ASSERT(pos != nullptr);
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim)
    fail("kernels", "rope: n_rot {} must be even, positive and <= head_dim {}", p.n_rot, head_dim);
  if (!p.freq_factors.empty() && int64_t(p.freq_factors.size()) != p.n_rot / 2)
    fail("kernels", "rope: {} freq_factors for n_rot {} (want n_rot/2)", p.freq_factors.size(), p.n_rot);
  if (p.yarn_ext_factor != 0 &&
      !(p.yarn_orig_ctx > 0 && p.freq_scale > 0 && p.yarn_beta_fast > 0 && p.yarn_beta_slow > 0 && p.freq_base > 1))
    fail("kernels", "rope: yarn needs a positive original context ({}), scale ({}) and betas ({}, {})", p.yarn_orig_ctx,
         p.freq_scale, p.yarn_beta_fast, p.yarn_beta_slow);
}

// Base angle per position unit of pair i, llama3 scaling included.
double inv_freq(const RopeParams& p, int64_t i) {
  return std::pow(static_cast<double>(p.freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(p.n_rot)) /
         rope_freq_factor(p, i);
}

// YaRN (llama.cpp's rope_yarn): pairs below the correction range keep their extrapolated angle,
// those above it the interpolated one (freq_scale times it), and the range in between mixes the
// two; cos and sin grow by 1 + 0.1 ln(1 / freq_scale). The range is where a pair turns
// beta_fast .. beta_slow times over the original context.
double yarn_corr_dim(const RopeParams& p, double beta) {
  return p.n_rot * std::log(p.yarn_orig_ctx / (beta * 2 * std::numbers::pi)) / (2 * std::log(p.freq_base));
}

// The cos and sin of pair i's angle at position pos, LongRoPE's and YaRN's scale included.
void pair_cos_sin(const RopeParams& p, int32_t pos, int64_t i, double* c, double* s) {
  const double extrap = static_cast<double>(pos) * inv_freq(p, i), interp = p.freq_scale * extrap;
  double theta = interp, mscale = p.attn_factor;
  if (p.yarn_ext_factor != 0) {
    const double low = std::max(0.0, std::floor(yarn_corr_dim(p, p.yarn_beta_fast)));
    const double high = std::min(static_cast<double>(p.n_rot - 1), std::ceil(yarn_corr_dim(p, p.yarn_beta_slow)));
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double mix = (1 - std::clamp(y, 0.0, 1.0)) * p.yarn_ext_factor;
    theta = interp * (1 - mix) + extrap * mix;
    mscale *= 1 + 0.1 * std::log(1 / static_cast<double>(p.freq_scale));
  }
  *c = std::cos(theta) * mscale;
  *s = std::sin(theta) * mscale;
}

// Rotates the first n_rot dims of one head by the angles whose cos/sin are given per pair.
inline void rotate_head(float* x, const float* cos_t, const float* sin_t, int64_t n_rot, bool neox) {
  const int64_t half = n_rot / 2;
  if (neox) {
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = x[i], x1 = x[i + half];
      x[i] = x0 * cos_t[i] - x1 * sin_t[i];
      x[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = x[2 * i], x1 = x[2 * i + 1];
      x[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
      x[2 * i + 1] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

// The cos and sin of every pair's angle at position pos: [cos | sin], n_rot / 2 each. A step ropes
// the same positions twice per layer (q and k), in every layer, so recent positions' tables are
// kept per thread (the angles in double cost more than rotating the token's heads). 256 of them:
// one thread may rope a whole prompt chunk, and with 64 a 128-token chunk evicted every table
// before k (or the next layer) came back to it (a one-thread worker's rope took 4x its share).
const float* rope_table(const RopeParams& p, int32_t pos) {
  struct Table {
    RopeParams p;
    int32_t pos = -1;
    std::vector<float> cs;
  };
  constexpr int kTables = 256;
  thread_local std::vector<Table> tables(kTables);
  Table& e = tables[static_cast<size_t>(pos) % kTables];
  if (e.pos == pos && e.p == p) return e.cs.data();
  e.p = p;
  e.pos = pos;
  e.cs.resize(p.n_rot);
  rope_cos_sin(p, pos, e.cs.data());
  return e.cs.data();
}

}  // namespace

void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs) {
  const int64_t half = p.n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    double c, s;
    pair_cos_sin(p, pos, i, &c, &s);
    cs[i] = static_cast<float>(c);
    cs[half + i] = static_cast<float>(s);
  }
}

float rope_freq_factor(const RopeParams& p, int64_t i) {
  WEFT_ASSERT(p.n_rot > 0 && i >= 0 && 2 * i < p.n_rot);
  if (!p.freq_factors.empty()) {
    WEFT_ASSERT(int64_t(p.freq_factors.size()) == p.n_rot / 2);
    return p.freq_factors[i];
  }
  if (p.llama3_factor <= 0.f) return 1.0f;
  if (p.llama3_high_freq_factor <= p.llama3_low_freq_factor)
    fail("kernels", "rope: llama3 high_freq_factor {} must exceed low_freq_factor {}", p.llama3_high_freq_factor,
         p.llama3_low_freq_factor);
  // As Meta's reference, HF's _compute_llama3_parameters and llama.cpp's rope_freqs tensor:
  // short wavelengths keep their frequency, long ones are slowed by `factor`, and the band in
  // between is interpolated linearly in orig_ctx / wavelen.
  const double freq = std::pow(static_cast<double>(p.freq_base), -2.0 * i / static_cast<double>(p.n_rot));
  const double wavelen = 2.0 * std::numbers::pi / freq;
  const double low_freq_wavelen = p.llama3_original_ctx / p.llama3_low_freq_factor;
  const double high_freq_wavelen = p.llama3_original_ctx / p.llama3_high_freq_factor;
  if (wavelen < high_freq_wavelen) return 1.0f;
  if (wavelen > low_freq_wavelen) return p.llama3_factor;
  const double smooth = (p.llama3_original_ctx / wavelen - p.llama3_low_freq_factor) /
                        (p.llama3_high_freq_factor - p.llama3_low_freq_factor);
  return static_cast<float>(1.0 / ((1.0 - smooth) / p.llama3_factor + smooth));
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos, const RopeParams& p) {
  check_params(head_dim, pos, p);
  const int64_t half = p.n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cs = rope_table(p, pos[t]);  // one table per token, shared by all its heads
    for (int64_t h = 0; h < n_heads; ++h) rotate_head(x + (t * n_heads + h) * head_dim, cs, cs + half, p.n_rot, p.neox);
  }
}

void rope_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos, const RopeParams& p) {
  check_params(head_dim, pos, p);
  const int64_t half = p.n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        double cd, sd;
        pair_cos_sin(p, pos[t], i, &cd, &sd);
        const float c = static_cast<float>(cd), s = static_cast<float>(sd);
        const int64_t a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
        const float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * c - x1 * s;
        xh[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace weft::kernels
