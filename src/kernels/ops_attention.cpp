// Causal attention of one layer over a KV cache, for a range of q heads. Per token t and q head h:
//   s_j = scale * q[t,h] . k[j, kv_of_q[h]]   for j in 0..pos[t] (a sliding window: its last `window`)
//   out[t,h] = sum_j softmax(s)_j v[j, kv_of_q[h]]   (a sink: one more logit in the softmax, no value)
// The softmax subtracts the row max first, so no score overflows exp() whatever its size.
#define WEFT_SIMD_TARGET  // the scalar lanes below (F32x1) need no target attribute
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/attention_simd.h"
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
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos[t] - s.window + 1) : 0;
    if (pos[t] < 0 || first < s.kv_pos0 || pos[t] - s.kv_pos0 >= s.n_ctx)
      fail("kernels", "attention: token {} at position {} (keys from {}) outside the cache's {} rows from {}", t,
           pos[t], first, s.n_ctx, s.kv_pos0);
  }
  for (DType c : {s.k_type, s.v_type})
    if (c != DType::F32 && c != DType::F16) fail("kernels", "attention: cache type {} (f32 or f16)", dtype_name(c));
  return {begin, end};
}

// Element i of a cache of type t (F32 or F16).
float cache_at(const void* cache, DType t, int64_t i) {
  return t == DType::F16 ? fp16_to_f32(static_cast<const uint16_t*>(cache)[i]) : static_cast<const float*>(cache)[i];
}

}  // namespace

// The scalar table's lanes: attention_simd.h over one float, so every ISA runs the same algorithm.
namespace detail {
namespace {
struct F32x1 {
  static constexpr int kLanes = 1;
  float v;
  static F32x1 load(const float* p) { return {*p}; }
  static F32x1 set1(float s) { return {s}; }
  static F32x1 zero() { return {0.f}; }
  void store(float* p) const { *p = v; }
  static F32x1 load_f16(const uint16_t* p) { return {fp16_to_f32(*p)}; }
  void store_f16(uint16_t* p) const { *p = f32_to_fp16(v); }
  friend F32x1 operator+(F32x1 a, F32x1 b) { return {a.v + b.v}; }
  friend F32x1 operator-(F32x1 a, F32x1 b) { return {a.v - b.v}; }
  friend F32x1 operator*(F32x1 a, F32x1 b) { return {a.v * b.v}; }
  friend F32x1 operator/(F32x1 a, F32x1 b) { return {a.v / b.v}; }
  friend F32x1 fmadd(F32x1 a, F32x1 b, F32x1 c) { return {std::fma(a.v, b.v, c.v)}; }
  friend F32x1 fnmadd(F32x1 a, F32x1 b, F32x1 c) { return {std::fma(-a.v, b.v, c.v)}; }
  friend F32x1 min(F32x1 a, F32x1 b) { return {std::min(a.v, b.v)}; }
  friend F32x1 max(F32x1 a, F32x1 b) { return {std::max(a.v, b.v)}; }
  friend F32x1 round(F32x1 a) { return {std::nearbyint(a.v)}; }
  friend F32x1 mul_pow2(F32x1 p, F32x1 n) { return {std::ldexp(p.v, static_cast<int>(n.v))}; }
  friend F32x1 where_less(F32x1 a, F32x1 b, F32x1 x, F32x1 y) { return a.v < b.v ? x : y; }
  static F32x1 iota() { return {0.f}; }
  friend F32x1 transpose_add(const F32x1* a) { return a[0]; }
  friend float reduce_add(F32x1 a) { return a.v; }
  friend float reduce_max(F32x1 a) { return a.v; }
};
}  // namespace

void attention_rows_scalar(const AttentionRows& rows) { simd::attention_rows<F32x1>(rows); }
void attention_decode_scalar(const AttentionRows& rows) { simd::attention_decode<F32x1>(rows); }
}  // namespace detail

// Rows of one kv head share each pass over its K/V rows: in decode the q heads of a GQA group (each
// K/V row read once per group, not per head) through attention_decode; in prompts a lane-full of
// (token, head) rows at a time through attention_rows. The kernel depends only on the call's token
// count (and rows_only), so a row's result does not depend on how heads are split between threads
// or devices.
void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
               const int32_t* kv_of_q, const int32_t* pos, float* out) {
  const auto [h_begin, h_end] = head_range(s, kv_of_q, pos);
  const int64_t hd = s.head_dim;
  if (hd > AttentionRows::kMaxHeadDim)
    fail("kernels", "attention: head_dim {} over {}", hd, AttentionRows::kMaxHeadDim);
  const OpsKernels& k = ops_kernels();
  const auto run = s.n_tokens == 1 && !s.rows_only ? k.attention_decode : k.attention_rows;
  AttentionRows b;
  b.kv_stride = hd;
  b.head_dim = hd;
  b.scale = s.scale;
  b.k_f16 = s.k_type == DType::F16;
  b.v_f16 = s.v_type == DType::F16;
  const size_t k_size = b.k_f16 ? 2 : 4, v_size = b.v_f16 ? 2 : 4;
  thread_local std::vector<const float*> qs;
  thread_local std::vector<float*> outs;
  thread_local std::vector<int32_t> n_valid;
  thread_local std::vector<float> sink;
  // Tokens whose keys start at the same position go together (all of them without a window):
  // their rows read the cache from that key on.
  auto first_key = [&](int64_t t) { return s.window > 0 ? std::max<int64_t>(0, pos[t] - s.window + 1) : 0; };
  for (int64_t t0 = 0, t1 = 0; t0 < s.n_tokens; t0 = t1) {
    const int64_t first = first_key(t0);
    for (t1 = t0 + 1; t1 < s.n_tokens && first_key(t1) == first;) ++t1;
    for (int64_t kv = 0; kv < s.n_kv_heads; ++kv) {
      qs.clear(), outs.clear(), n_valid.clear(), sink.clear();
      for (int64_t t = t0; t < t1; ++t)
        for (int64_t h = h_begin; h < h_end; ++h) {
          if (kv_of_q[h] != kv) continue;
          qs.push_back(q + (t * s.n_q_heads + h) * hd);
          outs.push_back(out + (t * s.n_q_heads + h) * hd);
          n_valid.push_back(static_cast<int32_t>(pos[t] + 1 - first));
          if (s.sinks) sink.push_back(s.sinks[h]);
        }
      if (qs.empty()) continue;
      b.k = static_cast<const uint8_t*>(k_cache) + (kv * s.n_ctx + first - s.kv_pos0) * hd * k_size;
      b.v = static_cast<const uint8_t*>(v_cache) + (kv * s.n_ctx + first - s.kv_pos0) * hd * v_size;
      b.q = qs.data();
      b.out = outs.data();
      b.n_valid = n_valid.data();
      b.sink = s.sinks ? sink.data() : nullptr;
      b.n_rows = static_cast<int64_t>(qs.size());
      run(b);
    }
  }
}

void attention_ref(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                   const int32_t* kv_of_q, const int32_t* pos, float* out) {
  const auto [h_begin, h_end] = head_range(s, kv_of_q, pos);
  const int64_t hd = s.head_dim;
  std::vector<float> p;
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos[t] - s.window + 1) : 0;
    const int64_t n_valid = int64_t{pos[t]} + 1 - first;
    p.assign(n_valid, 0.f);
    for (int64_t h = h_begin; h < h_end; ++h) {
      const int64_t kv = kv_of_q[h];
      const float* qh = q + (t * s.n_q_heads + h) * hd;
      float m = -INFINITY;
      for (int64_t j = 0; j < n_valid; ++j) {
        float dot = 0.f;
        for (int64_t d = 0; d < hd; ++d)
          dot += qh[d] * cache_at(k_cache, s.k_type, (kv * s.n_ctx + first - s.kv_pos0 + j) * hd + d);
        p[j] = dot * s.scale;
        m = std::max(m, p[j]);
      }
      if (s.sinks) m = std::max(m, s.sinks[h]);
      float sum = s.sinks ? std::exp(s.sinks[h] - m) : 0.f;  // a sink adds to the denominator only
      for (int64_t j = 0; j < n_valid; ++j) {
        p[j] = std::exp(p[j] - m);
        sum += p[j];
      }
      float* oh = out + (t * s.n_q_heads + h) * hd;
      for (int64_t d = 0; d < hd; ++d) {
        float acc = 0.f;
        for (int64_t j = 0; j < n_valid; ++j)
          acc += p[j] * cache_at(v_cache, s.v_type, (kv * s.n_ctx + first - s.kv_pos0 + j) * hd + d);
        oh[d] = acc / sum;
      }
    }
  }
}

}  // namespace weft::kernels
