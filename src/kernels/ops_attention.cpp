// Causal attention of one layer over a KV cache, for a range of q heads. Per token t and q head h:
//   s_j = scale * q[t,h] . k[j, kv_of_q[h]]   for j in 0..pos[t]
//   out[t,h] = sum_j softmax(s)_j v[j, kv_of_q[h]]
// The softmax subtracts the row max first, so no score overflows exp() whatever its size.
#include "core/error.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace weft::kernels {

namespace {

// Resolves the head range and checks what the caller computed (GQA map, positions).
std::pair<int64_t, int64_t> head_range(const AttentionShape& s, const int32_t* kv_of_q, const int32_t* pos) {
  WEFT_ASSERT(s.n_tokens >= 0 && s.n_q_heads > 0 && s.n_kv_heads > 0 && s.head_dim > 0);
  const int64_t begin = s.head_begin, end = s.head_end < 0 ? s.n_q_heads : s.head_end;
  if (begin < 0 || begin > end || end > s.n_q_heads)
    fail("kernels", "attention: head range [{}, {}) outside [0, {})", begin, end, s.n_q_heads);
  for (int64_t h = begin; h < end; ++h)
    if (kv_of_q[h] < 0 || kv_of_q[h] >= s.n_kv_heads)
      fail("kernels", "attention: q head {} maps to kv head {} of {}", h, kv_of_q[h], s.n_kv_heads);
  for (int64_t t = 0; t < s.n_tokens; ++t)
    if (pos[t] < 0) fail("kernels", "attention: token {} has negative position {}", t, pos[t]);
  return {begin, end};
}

}  // namespace

// K/V rows per tile: the scores of a tile for a whole head group stay in L1.
constexpr int64_t kTileRows = 64;
// q heads that share one pass over their kv head's rows (GQA groups are 1 to 8 heads in practice).
constexpr int64_t kMaxGroup = 8;

// Decode is bound by reading the cache, so the q heads of a GQA group are computed together:
// each K and V row is read from memory once per group instead of once per q head. The softmax
// is the online (running max) form over tiles of rows, which needs no per-position scratch:
// after each tile, sums and outputs accumulated under the old max are rescaled by
// exp(old_max - new_max) <= 1, so nothing overflows.
void attention(const AttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
               const int32_t* kv_of_q, const int32_t* pos, float* out, float* /*scratch*/) {
  const auto [h_begin, h_end] = head_range(s, kv_of_q, pos);
  const OpsKernels& k = ops_kernels();
  const int64_t hd = s.head_dim;
  const int64_t kv_row = s.n_kv_heads * hd;  // floats per cache row (one position)
  float scores[kMaxGroup][kTileRows];
  float run_max[kMaxGroup], run_sum[kMaxGroup];
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t n_valid = int64_t{pos[t]} + 1;
    for (int64_t h0 = h_begin; h0 < h_end;) {
      // Group: consecutive q heads reading the same kv head.
      const int32_t kv = kv_of_q[h0];
      int64_t n_group = 1;
      while (n_group < kMaxGroup && h0 + n_group < h_end && kv_of_q[h0 + n_group] == kv) ++n_group;
      const float* qh = q + (t * s.n_q_heads + h0) * hd;  // [n_group, hd]
      float* oh = out + (t * s.n_q_heads + h0) * hd;      // [n_group, hd]
      for (int64_t i = 0; i < n_group * hd; ++i) oh[i] = 0.f;
      for (int64_t g = 0; g < n_group; ++g) run_max[g] = -INFINITY, run_sum[g] = 0.f;
      for (int64_t j0 = 0; j0 < n_valid; j0 += kTileRows) {
        const int64_t nj = std::min(kTileRows, n_valid - j0);
        for (int64_t j = 0; j < nj; ++j) {
          const float* kr = k_cache + (j0 + j) * kv_row + kv * hd;
          for (int64_t g = 0; g < n_group; ++g) scores[g][j] = k.dot(qh + g * hd, kr, hd) * s.scale;
        }
        for (int64_t g = 0; g < n_group; ++g) {
          const float m = std::max(run_max[g], k.max(scores[g], nj));
          const float rescale = std::exp(run_max[g] - m);  // 0 on the first tile (-inf - m)
          run_sum[g] = run_sum[g] * rescale + k.exp_sum(scores[g], m, nj);
          if (rescale != 1.0f) k.scale(oh + g * hd, rescale, hd);
          run_max[g] = m;
        }
        for (int64_t j = 0; j < nj; ++j) {
          const float* vr = v_cache + (j0 + j) * kv_row + kv * hd;
          for (int64_t g = 0; g < n_group; ++g) k.axpy(scores[g][j], vr, oh + g * hd, hd);
        }
      }
      for (int64_t g = 0; g < n_group; ++g) k.scale(oh + g * hd, 1.0f / run_sum[g], hd);
      h0 += n_group;
    }
  }
}

void attention_ref(const AttentionShape& s, const float* q, const float* k_cache, const float* v_cache,
                   const int32_t* kv_of_q, const int32_t* pos, float* out) {
  const auto [h_begin, h_end] = head_range(s, kv_of_q, pos);
  const int64_t hd = s.head_dim, nkv = s.n_kv_heads;
  std::vector<float> p;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t n_valid = int64_t{pos[t]} + 1;
    p.assign(n_valid, 0.f);
    for (int64_t h = h_begin; h < h_end; ++h) {
      const int64_t kv = kv_of_q[h];
      const float* qh = q + (t * s.n_q_heads + h) * hd;
      float m = -INFINITY;
      for (int64_t j = 0; j < n_valid; ++j) {
        float dot = 0.f;
        for (int64_t d = 0; d < hd; ++d) dot += qh[d] * k_cache[(j * nkv + kv) * hd + d];
        p[j] = dot * s.scale;
        m = std::max(m, p[j]);
      }
      float sum = 0.f;
      for (int64_t j = 0; j < n_valid; ++j) {
        p[j] = std::exp(p[j] - m);
        sum += p[j];
      }
      float* oh = out + (t * s.n_q_heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) {
        float acc = 0.f;
        for (int64_t j = 0; j < n_valid; ++j) acc += p[j] * v_cache[(j * nkv + kv) * hd + d];
        oh[d] = acc / sum;
      }
    }
  }
}

}  // namespace weft::kernels
