// Float ops of the llama family. Activations are row-major [n_tokens, features] f32.
// Each op has a scalar reference (`*_ref`) beside the version the engine calls.
#pragma once

#include "core/dtype.h"
#include "core/rope_params.h"
#include "kernels/isa.h"

#include <cstdint>
#include <vector>

namespace weft::kernels {

// y[t, i] = x[t, i] / sqrt(mean_i(x[t]^2) + eps) * w[i]   (w may be null: no scale). y may alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n_tokens, int64_t n, float eps);
void rms_norm_ref(const float* x, const float* w, float* y, int64_t n_tokens, int64_t n, float eps);

// Same, per head: x is [n_tokens, n_heads, head_dim], w is [head_dim] (qwen3's q_norm/k_norm).
void rms_norm_heads(float* x, const float* w, int64_t n_tokens, int64_t n_heads, int64_t head_dim, float eps);

// RopeParams (core/rope_params.h): the rotation a model asks for.

// Divisor of the frequency of rotation pair i (i < n_rot/2): freq_factors[i] when given, else what
// llama3 scaling computes (the numbers llama.cpp stores in rope_freqs), else 1.
float rope_freq_factor(const RopeParams& p, int64_t i);

// The cos then the sin of each pair's angle at position pos ([n_rot] floats), as rope computes them
// (in double): for devices that rotate elsewhere with the CPU's angles.
void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs);

// Rotates x in place: x is [n_tokens, n_heads, head_dim], token t at position pos[t].
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos, const RopeParams& p);
void rope_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos, const RopeParams& p);

// In-place softmax of one row.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu(gate[i]) * up[i], GELU's tanh form as llama.cpp's CPU backend computes it: the
// gate rounded to half, its GELU a half from a table (0 below -10, the gate itself from 10 on).
void geglu(const float* gate, const float* up, float* out, int64_t n);
// gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// out = g * sigmoid(alpha g) * (u + 1), in float as llama.cpp's CPU backend (expf).
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit);
// The table geglu reads: the GELU of each half (by its bits), as a half; for devices that compute
// geglu elsewhere with the CPU's values.
const uint16_t* gelu_f16_table();
// GELU's tanh form in float: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).
float gelu_tanh(float x);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// x[i] *= s
void scale_row(float* x, float s, int64_t n);
// y[i] = x[i] as IEEE half, rounded to nearest even (KV cache rows under -ctk/-ctv f16).
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);

// Causal attention of one layer over a KV cache, for one device's heads.
//   q:  [n_tokens, n_q_heads, head_dim]   (already roped)
//   k_cache, v_cache: [n_kv_heads, n_ctx, head_dim] of k_type / v_type (F32 or F16); rows 0..pos[t]
//                     are valid for token t. Head-major: a decode step streams each head's rows
//                     as one contiguous run, which the hardware prefetcher follows
//   kv_of_q[h]: the local kv head that q head h reads (GQA; computed by the caller)
//   out: [n_tokens, n_q_heads, head_dim]
struct AttentionShape {
  int64_t n_tokens, n_q_heads, n_kv_heads, head_dim;
  float scale;                            // usually 1/sqrt(head_dim)
  int64_t head_begin = 0, head_end = -1;  // q heads to compute ([0, n_q_heads) when end < 0),
                                          // so threads can split the heads of one call
  DType k_type = DType::F32, v_type = DType::F32;
  int64_t n_ctx = 0;    // rows of each kv head in the caches; every pos[t] < n_ctx
  int64_t window = 0;   // > 0: token t sees keys pos[t] - window + 1 .. pos[t] only (sliding window)
  int64_t kv_pos0 = 0;  // the position each kv head's row 0 holds (a sliding window's cache)
  // Attention sinks (gpt-oss): per q head (of n_q_heads), a learned logit in the softmax's
  // denominator only; null: none.
  const float* sinks = nullptr;
  // Every token count through attention_rows (--exact): a row's result is then the same bits in a
  // prompt of any length, or alone as a decoding token (attention_decode sums in another order).
  bool rows_only = false;
};
void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
               const int32_t* kv_of_q, const int32_t* pos, float* out);
void attention_ref(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                   const int32_t* kv_of_q, const int32_t* pos, float* out);

// The query rows that read one kv head: (token, q head) pairs, n_rows of each array.
struct AttentionRows {
  static constexpr int64_t kMaxHeadDim = 576;  // DeepSeek's latent rows (512 + 64); Gemma 4's heads of 512
  const float* const* q = nullptr;             // each row's query [head_dim]
  float* const* out = nullptr;                 // each row's output [head_dim]
  const int32_t* n_valid = nullptr;            // keys 0..n_valid-1 are visible to the row (causal: pos + 1)
  const float* sink = nullptr;                 // per row, or null: a logit in its softmax's denominator only
  int64_t n_rows = 0;
  const void* k = nullptr;  // key j of this kv head at element j * kv_stride (likewise v)
  const void* v = nullptr;
  bool k_f16 = false, v_f16 = false;  // else f32
  int64_t kv_stride = 0, head_dim = 0;
  float scale = 1.f;
};

// One token of one value head of Gated DeltaNet (ggml_gated_delta_net's): S, n x n (row i: key
// feature i over the value features), decays, then learns v - S^T k at rate beta:
//   S = decay S;  S += k (beta (v - S^T k))^T;  out = scale S^T q
struct DeltaStep {
  float* state = nullptr;
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float* out = nullptr;
  float beta = 0, decay = 1, scale = 1;
  int64_t n = 0;
};
void delta_step_ref(const DeltaStep& s);

// The same recurrence over up to kDeltaChunk tokens at once (the chunked delta rule): with g_t the
// decays' product over the chunk's first t tokens, the state after token t is
//   S_t = g_t S_0 + sum_{s<=t} (g_t / g_s) k_s u_s^T,
// whose corrections u_t = beta_t (v_t - g_t S_0^T k_t - sum_{s<t} (g_t / g_s) (k_s . k_t) u_s)
// follow by forward substitution, out_t = scale S_t^T q_t, and S_0 is read once for the chunk (as
// products of its tokens' q and k with it) where delta_step reads it a token at a time. The
// decays enter as logs, so that no product of them underflows.
inline constexpr int64_t kDeltaChunk = 64;
struct DeltaChunk {
  float* state = nullptr;  // n x n, as DeltaStep's
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float* out = nullptr;
  int64_t qk_stride = 0, v_stride = 0;                // token t's q, k at t * qk_stride; its v, out at t * v_stride
  const float *beta = nullptr, *log_decay = nullptr;  // token t's at t
  float scale = 1;
  int64_t n = 0, n_tokens = 0;  // n_tokens: 1..kDeltaChunk
  float* work = nullptr;        // delta_chunk_work(n) floats
};
constexpr int64_t delta_chunk_work(int64_t n) {
  return 5 * kDeltaChunk * n + 2 * kDeltaChunk * kDeltaChunk + kDeltaChunk;
}
void delta_chunk_ref(const DeltaChunk& c);

// Inner loops of the ops above, one table per ISA. The ops call the best table this CPU runs;
// tests compare every table with the scalar one.
struct OpsKernels {
  float (*sum_sq)(const float* x, int64_t n);                                       // sum x[i]^2
  void (*scale_mul)(const float* x, float s, const float* w, float* y, int64_t n);  // y = x*s*w (w null: 1)
  float (*max)(const float* x, int64_t n);                                          // n >= 1
  float (*exp_sum)(float* x, float m, int64_t n);                                   // x = exp(x - m); returns sum
  void (*scale)(float* x, float s, int64_t n);                                      // x *= s
  void (*silu)(const float* x, float* y, int64_t n);                                // y = x / (1 + exp(-x)); y may be x
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  void (*geglu)(const float* gate, const float* up, float* out, int64_t n);  // geglu(): the same bits at each level
  void (*add)(float* y, const float* x, int64_t n);
  void (*to_f16)(const float* x, uint16_t* y, int64_t n);  // round to nearest even
  void (*attention_rows)(const AttentionRows& rows);       // prompts: one row per lane
  void (*attention_decode)(const AttentionRows& rows);     // one token: rows one at a time
  void (*delta_step)(const DeltaStep& s);                  // Gated DeltaNet: one token of one value head
  void (*delta_chunk)(const DeltaChunk& c);                // Gated DeltaNet: a chunk of one value head
  Isa isa;                                                 // the level this table needs
};

// The table the ops use: the best this CPU runs (detected_isa()), unless forced.
const OpsKernels& ops_kernels();
// The table of one ISA level; nullptr when this CPU cannot run it.
const OpsKernels* ops_kernels_for_isa(Isa isa);
// Makes the ops use one ISA's table (tests, benchmarks); throws weft::Error when unavailable.
void force_ops_isa(Isa isa);

namespace detail {
// Each level's table, defined in ops_ref.cpp, ops_avx2.cpp, ops_avx512.cpp; only
// ops_kernels_for_isa checks that this CPU runs it.
template <Isa I>
const OpsKernels& ops_table();
template <>
const OpsKernels& ops_table<Isa::Scalar>();
template <>
const OpsKernels& ops_table<Isa::Avx2>();
template <>
const OpsKernels& ops_table<Isa::Avx512>();

// A DeltaChunk's work, shared by every level: S_0^T k_t (then the corrections u_t) and S_0^T q_t a
// row each; the chunk's q and k rows side by side (a step's rows lie a multiple of 4 KiB apart,
// which would share cache sets); every token's k key-major (columns past the chunk's tokens 0),
// then scaled by g_m / g_t for the state's update; k_t . k_s and q_t . k_s (rows kDeltaChunk
// wide), then with their decays and rates folded in (s <= t); the log of g_t.
struct DeltaChunkWork {
  float *u, *p, *q, *k, *k_t, *kk, *qk, *log_g;
};
// The layout; log g_t; the copies of q and k, and k key-major.
DeltaChunkWork delta_chunk_prepare(const DeltaChunk& c);
// exp(log_ratio) for a decay over tokens (log_ratio <= 0), 0 where it would be below 1e-35: a
// subnormal factor costs a microcode assist in every product it enters, and adds nothing.
float delta_decay(float log_ratio);
// Folds beta_t g_t / g_s into kk and g_t / g_s into qk (their dot products already there), and
// fills k_t.
void delta_chunk_coefficients(const DeltaChunk& c, const DeltaChunkWork& w);
}  // namespace detail

}  // namespace weft::kernels
