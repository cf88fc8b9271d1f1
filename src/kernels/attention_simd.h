// Causal attention over a block of query rows that share a kv head, written once against the
// vector type V of ops_simd.h (after the MLX Simd<T, N> idea; N = 1 is the scalar table's kernel).
// Two kernels, picked by the call's token count (ops_attention.cpp):
// - attention_rows (prompts): one row per lane. A key's scores for the whole block are one
//   vector, and the online-softmax statistics (running max, running sum) are vectors too:
//     scores:  s[j] = scale * sum_d bcast(k_j[d]) * qt[d]      (qt: the block's queries, transposed)
//     values:  acc[d] = acc[d] * rescale + sum_j bcast(v_j[d]) * p[j]
//   Each FMA reads one broadcast scalar and one vector already in L1; the kv cache is read once
//   per block. Lanes are independent, so a row's result does not depend on its neighbours.
// - attention_decode (one token): too few rows to fill the lanes, so lanes hold head dims and keys.
// The kv cache is read once per block either way; an f16 cache is converted tile by tile into L1
// for attention_rows, and in registers as attention_decode loads it.
#pragma once

#include "kernels/ops_simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::kernels::detail::simd {

constexpr int64_t kKeyTile = 64;        // keys per softmax update; their scores stay in L1
constexpr int64_t kMaxDecodeRows = 16;  // rows attention_decode_cache keeps state for
constexpr int64_t kPrefetchRows = 32;

// Softmax terms under e^-44 (2^-63 of the row's largest, 1) are zero: no f32 sum can hold them, and
// multiplied by values they make subnormal floats, which x86 cores handle in microcode at some 100
// times the cost of an FMA (unscaled scores over heads of 512, as Gemma 4's, spread by hundreds).
constexpr float kNegligibleLogit = -44.f;

// exp(x) for x <= 0 (a score less the running max), zero where negligible (or -inf: a hidden key).
template <class V>
WEFT_SIMD_INLINE V softmax_term(V x) {
  return where_less(x, V::set1(kNegligibleLogit), V::zero(), exp(x));
}
inline float softmax_term(float x) { return x < kNegligibleLogit ? 0.f : std::exp(x); }

// Scores of NK keys (rows of kb) against the block, masked to -inf where a key is not visible.
template <class V, int NK>
WEFT_SIMD_TARGET inline void score_keys(const float* const* kb, int64_t j, const float* qt, int64_t hd, V scale, V lim,
                                        float* s, V& m) {
  constexpr int L = V::kLanes;
  V acc[NK];
  for (int c = 0; c < NK; ++c) acc[c] = V::zero();
  for (int64_t d = 0; d < hd; ++d) {
    const V q = V::load(qt + d * L);
    for (int c = 0; c < NK; ++c) acc[c] = fmadd(V::set1(kb[c][d]), q, acc[c]);
  }
  for (int c = 0; c < NK; ++c) {
    const V sc = where_less(V::set1(static_cast<float>(j + c)), lim, acc[c] * scale, V::set1(-INFINITY));
    sc.store(s + (j + c) * L);
    m = max(m, sc);
  }
}

// acc[d0 .. d0 + ND) = acc * rescale + sum over the tile's keys of bcast(v_j[d]) * p[j].
template <class V, int ND>
WEFT_SIMD_TARGET inline void accumulate_values(const float* v0, int64_t kv_stride, int64_t nj, const float* p,
                                               int64_t d0, V rescale, float* acc) {
  constexpr int L = V::kLanes;
  V a[ND];
  for (int c = 0; c < ND; ++c) a[c] = V::load(acc + (d0 + c) * L) * rescale;
  for (int64_t j = 0; j < nj; ++j) {
    const V pj = V::load(p + j * L);
    const float* vr = v0 + j * kv_stride + d0;
    for (int c = 0; c < ND; ++c) a[c] = fmadd(V::set1(vr[c]), pj, a[c]);
  }
  for (int c = 0; c < ND; ++c) a[c].store(acc + (d0 + c) * L);
}

// Rows [j0, j0 + nj) of a cache as f32: in place, or (f16 caches) converted into buf, a tile that
// stays in L2 while every lane reads it. *stride: floats between rows of the result.
template <class V>
WEFT_SIMD_TARGET inline const float* cache_tile(const void* cache, bool f16, int64_t j0, int64_t nj, int64_t kv_stride,
                                                int64_t hd, float* buf, int64_t* stride) {
  if (!f16) {
    *stride = kv_stride;
    return static_cast<const float*>(cache) + j0 * kv_stride;
  }
  const uint16_t* src = static_cast<const uint16_t*>(cache) + j0 * kv_stride;
  for (int64_t j = 0; j < nj; ++j) {
    const auto* ahead = reinterpret_cast<const char*>(src + (j + kPrefetchRows) * kv_stride);
    for (int64_t b = 0; b < hd * 2; b += 64) __builtin_prefetch(ahead + b, 0, 3);
    from_f16<V>(src + j * kv_stride, buf + j * hd, hd);
  }
  *stride = hd;
  return buf;
}

// attention_rows keeps each block of L rows (one row per lane) in one float array between key
// tiles: qt [hd][L] (its queries, transposed), acc [hd][L] (output accumulators), then one vector
// each of per-lane key limit, running max and running sum.
constexpr int64_t block_floats(int64_t hd, int lanes) { return 2 * hd * lanes + 3 * lanes; }

// Fills block blk's state from its rows; returns the keys any of its rows sees.
template <class V>
WEFT_SIMD_TARGET inline int32_t start_block(const AttentionRows& b, int64_t blk, float* state) {
  constexpr int L = V::kLanes;
  const int64_t hd = b.head_dim, r0 = blk * L, live = std::min<int64_t>(L, b.n_rows - r0);
  float* qt = state;
  float* acc = qt + hd * L;
  float* lim = acc + hd * L;
  int32_t keys = 0;
  for (int64_t i = 0; i < live; ++i) keys = std::max(keys, b.n_valid[r0 + i]);
  // Absent lanes get zero queries and see every key of the block: finite scores, never stored.
  for (int i = 0; i < L; ++i) {
    for (int64_t d = 0; d < hd; ++d) qt[d * L + i] = i < live ? b.q[r0 + i][d] : 0.f;
    lim[i] = static_cast<float>(i < live ? b.n_valid[r0 + i] : keys);
  }
  for (int64_t i = 0; i < hd * L; ++i) acc[i] = 0.f;
  // The softmax starts at the row's sink where it has one (its max that logit, its sum exp(0)).
  for (int i = 0; i < L; ++i) {
    const bool sink = b.sink && i < live;
    lim[L + i] = sink ? b.sink[r0 + i] : -INFINITY;
    lim[2 * L + i] = sink ? 1.f : 0.f;
  }
  return keys;
}

// One block against keys [j0, j0 + nj) (k0 / v0: the tile's rows from j0): scores into s, the
// online-softmax update of the running max and sum, and the values into the accumulators.
template <class V>
WEFT_SIMD_TARGET inline void attend_tile(const float* k0, int64_t k_stride, const float* v0, int64_t v_stride,
                                         int64_t j0, int64_t nj, int64_t hd, V scale, float* state, float* s) {
  constexpr int L = V::kLanes;
  constexpr int kKeys = 8, kDims = 8;  // register blocking: keys per score pass, dims per value pass
  const V zero = V::zero();
  const float* qt = state;
  float* acc = state + hd * L;
  float* lim_p = acc + hd * L;
  const V tile_lim = V::load(lim_p) - V::set1(static_cast<float>(j0));  // keys visible to each lane, from j0
  const V run_max = V::load(lim_p + L);
  V m = run_max;
  int64_t j = 0;
  for (; j + kKeys <= nj; j += kKeys) {
    const float* kb[kKeys];
    for (int c = 0; c < kKeys; ++c) kb[c] = k0 + (j + c) * k_stride;
    score_keys<V, kKeys>(kb, j, qt, hd, scale, tile_lim, s, m);
  }
  for (; j < nj; ++j) {
    const float* kb[1] = {k0 + j * k_stride};
    score_keys<V, 1>(kb, j, qt, hd, scale, tile_lim, s, m);
  }
  // Every lane sees a key of the first tile (a window's first key is its row 0), so m is finite
  // from the first tile on; exp(-inf - m) = 0 rescales the empty accumulators of the first tile.
  const V rescale = softmax_term(run_max - m);
  V sum = zero;
  for (j = 0; j < nj; ++j) {  // probabilities over the scores; hidden keys exactly 0
    const V p = where_less(V::set1(static_cast<float>(j)), tile_lim, softmax_term(V::load(s + j * L) - m), zero);
    p.store(s + j * L);
    sum = sum + p;
  }
  fmadd(V::load(lim_p + 2 * L), rescale, sum).store(lim_p + 2 * L);
  m.store(lim_p + L);
  int64_t d = 0;
  for (; d + kDims <= hd; d += kDims) accumulate_values<V, kDims>(v0, v_stride, nj, s, d, rescale, acc);
  for (; d < hd; ++d) accumulate_values<V, 1>(v0, v_stride, nj, s, d, rescale, acc);
}

// Divides block blk's accumulators by its running sums into its rows' outputs.
template <class V>
WEFT_SIMD_TARGET inline void finish_block(const AttentionRows& b, int64_t blk, const float* state) {
  constexpr int L = V::kLanes;
  const int64_t hd = b.head_dim, r0 = blk * L, live = std::min<int64_t>(L, b.n_rows - r0);
  const float* acc = state + hd * L;
  const V inv = V::set1(1.f) / V::load(acc + hd * L + 2 * L);
  alignas(64) float row[L];
  for (int64_t d = 0; d < hd; ++d) {
    (V::load(acc + d * L) * inv).store(row);
    for (int64_t i = 0; i < live; ++i) b.out[r0 + i][d] = row[i];
  }
}

// Rows go in blocks of L (one row per lane); the key tiles are the outer loop, so each K/V tile is
// read (and converted) once for every block, not once per block.
template <class V>
WEFT_SIMD_TARGET void attention_rows(const AttentionRows& b) {
  constexpr int L = V::kLanes;
  const int64_t hd = b.head_dim, n_blocks = (b.n_rows + L - 1) / L, per_block = block_floats(hd, L);
  thread_local std::vector<float> state;
  thread_local std::vector<int32_t> block_keys;  // keys any row of the block sees
  if (state.size() < static_cast<size_t>(per_block * n_blocks)) state.resize(per_block * n_blocks);
  block_keys.assign(n_blocks, 0);
  int32_t n_keys = 0;
  for (int64_t blk = 0; blk < n_blocks; ++blk) {
    block_keys[blk] = start_block<V>(b, blk, state.data() + blk * per_block);
    n_keys = std::max(n_keys, block_keys[blk]);
  }
  alignas(64) float s[kKeyTile * L];
  // A tile of converted keys and values, off the stack (128 KiB each at the widest heads).
  thread_local std::vector<float> k_tile, v_tile;
  if (k_tile.size() < static_cast<size_t>(kKeyTile * hd)) {
    k_tile.resize(kKeyTile * hd);
    v_tile.resize(kKeyTile * hd);
  }
  float* k_buf = k_tile.data();
  float* v_buf = v_tile.data();
  const V scale = V::set1(b.scale);
  for (int64_t j0 = 0; j0 < n_keys; j0 += kKeyTile) {
    const int64_t nj_all = std::min<int64_t>(kKeyTile, n_keys - j0);
    int64_t k_stride = 0, v_stride = 0;
    const float* k0 = cache_tile<V>(b.k, b.k_f16, j0, nj_all, b.kv_stride, hd, k_buf, &k_stride);
    const float* v0 = cache_tile<V>(b.v, b.v_f16, j0, nj_all, b.kv_stride, hd, v_buf, &v_stride);
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      if (block_keys[blk] <= j0) continue;  // causal: the block sees nothing from here on
      const int64_t nj = std::min<int64_t>(nj_all, block_keys[blk] - j0);
      attend_tile<V>(k0, k_stride, v0, v_stride, j0, nj, hd, scale, state.data() + blk * per_block, s);
    }
  }
  for (int64_t blk = 0; blk < n_blocks; ++blk) finish_block<V>(b, blk, state.data() + blk * per_block);
}

// Decode: a token's few rows (the q heads of a GQA group) would leave most lanes of
// attention_rows empty, so here the lanes hold head dims (scores) and keys (softmax) instead:
//   scores of L keys for one row: sum_k = sum over d-vectors q[dv] * k_k[dv], then transpose_add
//   puts the L sums in one vector;  values: out[dv] = out[dv] * rescale + sum_j bcast(p_j) * v_j[dv].
// kDv = head_dim / L vectors per row, a compile-time count so the queries and the output block
// stay in registers. kR rows go through a tile together, so each key and value vector loaded
// (and converted, from an f16 cache) feeds kR FMAs: one row at a time, the loads bound the kernel.
template <int kDv>
constexpr int decode_rows_together() {
  return kDv >= 16 ? 1 : 16 / kDv < 4 ? 16 / kDv : 4;  // kR * kDv query vectors in registers
}

template <class V>
WEFT_SIMD_INLINE V load_cache(const float* p) {
  return V::load(p);
}
template <class V>
WEFT_SIMD_INLINE V load_cache(const uint16_t* p) {
  return V::load_f16(p);
}

// Prefetching a later row pays on f16 caches; f32 rows measured slower with it (BM_attention).
template <class T>
constexpr bool kPrefetch = sizeof(T) == 2;

// The rows of one decode call and their running state: output accumulators, softmax max and sum.
template <class KT, class VT>
struct DecodeRows {
  const AttentionRows& b;
  const KT* k;  // key j at k + j * b.kv_stride
  const VT* v;
  float* out;  // [rows][head_dim]
  float* run_max;
  float* run_sum;
};

// Rows [i0, i0 + kR) against keys [j0, j0 + nj), visible to each row up to its n_valid.
// p: kR score rows of kKeyTile + L floats.
template <class V, int kDv, int kR, class KT, class VT>
WEFT_SIMD_TARGET inline void decode_tile(const DecodeRows<KT, VT>& d, int64_t i0, int64_t j0, int64_t nj, float* p) {
  constexpr int L = V::kLanes;
  constexpr int kOut = kDv < 8 ? kDv : 8;  // output vectors per row held across a tile's keys
  constexpr int64_t hd = int64_t{kDv} * L, kP = kKeyTile + L;
  const AttentionRows& b = d.b;
  const int64_t stride = b.kv_stride;
  alignas(64) float sums[kR][L * L];
  int64_t visible[kR], keys = 0;  // keys of this tile each row sees, and any row
  for (int r = 0; r < kR; ++r) {
    visible[r] = std::clamp<int64_t>(b.n_valid[i0 + r] - j0, 0, nj);
    keys = std::max(keys, visible[r]);
  }
  if (keys == 0) return;
  const V neg_inf = V::set1(-INFINITY), zero = V::zero(), scale = V::set1(b.scale);
  V q[kR][kDv], m[kR];
  for (int r = 0; r < kR; ++r) {
    for (int dv = 0; dv < kDv; ++dv) q[r][dv] = V::load(b.q[i0 + r] + dv * L);
    m[r] = neg_inf;
  }
  const KT* k0 = d.k + j0 * stride;
  for (int64_t kb = 0; kb < keys; kb += L) {
    for (int c = 0; c < L; ++c) {  // keys past `keys` repeat the last one; masked below
      const KT* kr = k0 + std::min<int64_t>(kb + c, keys - 1) * stride;
      if constexpr (kPrefetch<KT>) {
        const auto* ahead = reinterpret_cast<const char*>(kr + kPrefetchRows * stride);
        for (size_t o = 0; o < hd * sizeof(KT); o += 64) __builtin_prefetch(ahead + o, 0, 3);
      }
      V kv[kDv];
      for (int dv = 0; dv < kDv; ++dv) kv[dv] = load_cache<V>(kr + dv * L);
      for (int r = 0; r < kR; ++r) {
        V acc = zero;
        for (int dv = 0; dv < kDv; ++dv) acc = fmadd(q[r][dv], kv[dv], acc);
        acc.store(sums[r] + c * L);
      }
    }
    const V lane = V::iota() + V::set1(static_cast<float>(kb));
    for (int r = 0; r < kR; ++r) {
      V t[L];
      for (int c = 0; c < L; ++c) t[c] = V::load(sums[r] + c * L);
      const V sc = where_less(lane, V::set1(static_cast<float>(visible[r])), transpose_add(t) * scale, neg_inf);
      sc.store(p + r * kP + kb);
      m[r] = max(m[r], sc);
    }
  }
  float rescale[kR];
  for (int r = 0; r < kR; ++r) {  // a row that sees no key here keeps its max: rescale 1, p 0
    const int64_t i = i0 + r;
    const float m_new = std::max(d.run_max[i], reduce_max(m[r]));
    rescale[r] = softmax_term(d.run_max[i] - m_new);  // 0 on the first tile
    const V n_visible = V::set1(static_cast<float>(visible[r]));
    V sum = zero;
    for (int64_t kb = 0; kb < keys; kb += L) {
      const V lane = V::iota() + V::set1(static_cast<float>(kb));
      const V e = where_less(lane, n_visible, softmax_term(V::load(p + r * kP + kb) - V::set1(m_new)), zero);
      e.store(p + r * kP + kb);
      sum = sum + e;
    }
    d.run_sum[i] = d.run_sum[i] * rescale[r] + reduce_add(sum);
    d.run_max[i] = m_new;
  }
  const VT* v0 = d.v + j0 * stride;
  for (int dv = 0; dv < kDv; dv += kOut) {
    V a[kR][kOut];
    for (int r = 0; r < kR; ++r)
      for (int c = 0; c < kOut; ++c) a[r][c] = V::load(d.out + (i0 + r) * hd + (dv + c) * L) * V::set1(rescale[r]);
    for (int64_t j = 0; j < keys; ++j) {
      const VT* vr = v0 + j * stride + dv * L;
      if (kPrefetch<VT> && dv == 0) {
        const auto* ahead = reinterpret_cast<const char*>(vr + kPrefetchRows * stride);
        for (size_t o = 0; o < hd * sizeof(VT); o += 64) __builtin_prefetch(ahead + o, 0, 3);
      }
      V vv[kOut];
      for (int c = 0; c < kOut; ++c) vv[c] = load_cache<V>(vr + c * L);
      for (int r = 0; r < kR; ++r) {
        const V pj = V::set1(p[r * kP + j]);
        for (int c = 0; c < kOut; ++c) a[r][c] = fmadd(pj, vv[c], a[r][c]);
      }
    }
    for (int r = 0; r < kR; ++r)
      for (int c = 0; c < kOut; ++c) a[r][c].store(d.out + (i0 + r) * hd + (dv + c) * L);
  }
}

template <class V, int kDv, class KT, class VT>
WEFT_SIMD_TARGET void attention_decode_cache(const AttentionRows& b) {
  constexpr int L = V::kLanes, kR = decode_rows_together<kDv>();
  constexpr int64_t hd = int64_t{kDv} * L;
  alignas(64) float out[kMaxDecodeRows * hd];
  alignas(64) float p[kR * (kKeyTile + L)];
  float run_max[kMaxDecodeRows], run_sum[kMaxDecodeRows];
  int32_t n_keys = 0;
  for (int i = 0; i < b.n_rows; ++i) {
    n_keys = std::max(n_keys, b.n_valid[i]);
    run_max[i] = b.sink ? b.sink[i] : -INFINITY;  // a sink: the softmax starts at its logit
    run_sum[i] = b.sink ? 1.f : 0.f;
    for (int64_t dd = 0; dd < hd; ++dd) out[i * hd + dd] = 0.f;
  }
  const DecodeRows<KT, VT> d{b, static_cast<const KT*>(b.k), static_cast<const VT*>(b.v), out, run_max, run_sum};
  for (int64_t j0 = 0; j0 < n_keys; j0 += kKeyTile) {
    const int64_t nj = std::min<int64_t>(kKeyTile, n_keys - j0);
    int64_t i = 0;
    for (; i + kR <= b.n_rows; i += kR) decode_tile<V, kDv, kR>(d, i, j0, nj, p);
    if constexpr (kR > 2)
      for (; i + 2 <= b.n_rows; i += 2) decode_tile<V, kDv, 2>(d, i, j0, nj, p);
    for (; i < b.n_rows; ++i) decode_tile<V, kDv, 1>(d, i, j0, nj, p);
  }
  for (int i = 0; i < b.n_rows; ++i) {
    const float inv = 1.f / run_sum[i];
    for (int64_t dd = 0; dd < hd; ++dd) b.out[i][dd] = out[i * hd + dd] * inv;
  }
}

template <class V, int kDv>
WEFT_SIMD_TARGET void attention_decode_dv(const AttentionRows& b) {
  if (b.k_f16)
    return b.v_f16 ? attention_decode_cache<V, kDv, uint16_t, uint16_t>(b)
                   : attention_decode_cache<V, kDv, uint16_t, float>(b);
  return b.v_f16 ? attention_decode_cache<V, kDv, float, uint16_t>(b) : attention_decode_cache<V, kDv, float, float>(b);
}

// Head dims that are not a whole number of vectors (of at most 32) go through attention_rows,
// L rows at a time.
template <class V>
WEFT_SIMD_TARGET void attention_decode(const AttentionRows& b) {
  constexpr int L = V::kLanes;
  void (*kernel)(const AttentionRows&) = nullptr;
  switch (b.head_dim % L == 0 ? b.head_dim / L : 0) {
    case 1: kernel = attention_decode_dv<V, 1>; break;
    case 2: kernel = attention_decode_dv<V, 2>; break;
    case 4: kernel = attention_decode_dv<V, 4>; break;
    case 8: kernel = attention_decode_dv<V, 8>; break;
    case 16: kernel = attention_decode_dv<V, 16>; break;
    case 32: kernel = attention_decode_dv<V, 32>; break;
    default: return attention_rows<V>(b);
  }
  for (int64_t r0 = 0; r0 < b.n_rows; r0 += kMaxDecodeRows) {  // its per-row state is on the stack
    AttentionRows part = b;
    part.q += r0;
    part.out += r0;
    part.n_valid += r0;
    if (part.sink) part.sink += r0;
    part.n_rows = std::min<int64_t>(kMaxDecodeRows, b.n_rows - r0);
    kernel(part);
  }
}

}  // namespace weft::kernels::detail::simd
