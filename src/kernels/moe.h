// Mixture-of-experts kernels (llama.cpp's build_moe_ffn): routing, and matmuls against stacked
// expert matrices. A call reads each expert's matrix once for all the tokens routed to it (a
// prompt's tokens grouped by expert), and never reads an expert no token selected.
#pragma once

#include "core/thread_pool.h"
#include "kernels/matmul.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace weft::kernels {

// A token's routes: a row of 2k floats, the k selected expert ids (exact small integers), then
// their weights.
inline int64_t route_id(const float* routes, int64_t j) { return static_cast<int64_t>(routes[j]); }
inline float route_weight(const float* routes, int64_t k, int64_t j) { return routes[k + j]; }

// How a router's logits become routes (llama.cpp's gating functions).
struct MoeRouting {
  int64_t n_expert = 0, k = 0;
  bool norm = false;  // the k weights divided by their sum (clamped to >= 2^-14 as llama.cpp does)
  // false: p = softmax(logits), the k experts of highest p, p their weights (SOFTMAX);
  // true: the k experts of highest logit, a softmax over those k logits their weights (SOFTMAX_WEIGHT).
  bool softmax_selected = false;
  // Where set, n_expert values: each weight, last, times its expert's (Gemma 4's per-expert output
  // scale, which multiplies an expert's output as linearly as its weight does).
  const float* expert_scale = nullptr;
  // DeepSeek (V3's SIGMOID gating): p = sigmoid(logits) in place of the softmax; experts chosen by
  // p + selection_bias (n_expert values, where set), weighted by p.
  bool sigmoid = false;
  const float* selection_bias = nullptr;
  // Expert groups (n_groups > 1): only experts of the n_groups_used groups whose two best selection
  // scores sum highest are chosen.
  int64_t n_groups = 0, n_groups_used = 0;
  float weights_scale = 0.f;  // > 0: the k weights times it (after norm)
};
// Per token, the k selected experts in descending order (ties to the lower id) and their weights.
// logits: [n_tokens, n_expert]; routes: [n_tokens, 2k].
void moe_route(const float* logits, int64_t n_tokens, const MoeRouting& r, float* routes);
void moe_route_ref(const float* logits, int64_t n_tokens, const MoeRouting& r, float* routes);

// The matrices of experts [first, first + n), each `rows` rows of `w.cols` (rows of expert `first + i`
// are rows [i * rows, (i + 1) * rows) of w): what one device holds of a stacked tensor.
// The stack may be in WeightLayout::Panels when every expert is whole panels (see
// can_repack_experts): its matrices are then repacked one by one, each where its rows would be.
struct ExpertStack {
  WeightMatrix w;
  int64_t first = 0, n = 0, rows = 0;
  const float* bias = nullptr;  // optional [n][rows]: each held expert's output bias (gpt-oss)
  bool holds(int64_t id) const { return id >= first && id < first + n; }
  WeightMatrix expert(int64_t id) const;  // id held
};

// Whether experts shaped like `one` (rows, cols, type) may be stored as panels, each repacked on
// its own (kernels::repack) at one expert's bytes from the last: whole 16-row panels, 64-byte
// aligned, and a panel kernel for the type on this CPU.
bool can_repack_experts(const WeightMatrix& one);

// Per-runner buffers reused across calls, so a step allocates nothing once warm.
struct MoeScratch {
  std::vector<int64_t> begin;   // slots of held expert i: slots[begin[i] .. begin[i + 1])
  std::vector<int64_t> slots;   // t * k + j, grouped by expert, tokens ascending
  std::vector<int64_t> expert;  // the held expert of each entry of slots
  std::vector<float> x, y;      // gathered inputs and outputs
  std::vector<uint8_t> act;     // each slot's input in the weight type's activation format
  std::vector<int64_t> src;     // the entry of slots whose converted input each entry reads
  std::vector<int64_t> order;   // entries sorted by input row (finding src)
  std::vector<int64_t> entry;   // the entry of slots of each slot t * k + j (-1: expert held elsewhere)
  std::vector<int64_t> fixed;   // one expert's products in fixed point
  std::vector<float> routes;    // head_matmul's: every token to every head's matrix
  MatmulScratch mm;
};

// Gate / up: y[t, j, :] = W[e_tj] x[t, :] (+ b[e_tj]) for each slot j < k whose expert the stack
// holds; the other slots are zero.  x: [n_tokens, w.cols]; routes: [n_tokens, 2k]; y: [n_tokens, k, w.rows].
void expert_matmul(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens, float* y,
                   ThreadPool& pool, MoeScratch& s);
// A matrix per head (DeepSeek's attn_k_b, attn_v_b: a stack of the heads [first, first + n)):
// y[t, h, :] = W[first + h] times the first w.cols features of x[t * ldx + h * in_head ..], every
// head of every token in one pass over the pool, as the experts' products go.  y: [n_tokens, n, w.rows].
void head_matmul(const ExpertStack& w, const float* x, int64_t ldx, int64_t in_head, int64_t n_tokens, float* y,
                 ThreadPool& pool, MoeScratch& s);
// Down and the weighted sum: y[t, :] = sum_j weight_tj * (W[e_tj] x[t, j, :] (+ b[e_tj])) over the
// slots whose expert the stack holds (zero when none).  x: [n_tokens, k, w.cols]; y: [n_tokens, w.rows].
void expert_matmul_sum(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens, float* y,
                       ThreadPool& pool, MoeScratch& s);
// The same sum in fixed point (kernels/fixed_point.h), for a split that cuts it (--exact):
// acc[t, :] += to_fixed(weight_tj * P) for each granule's partial P of W[e_tj] x[t, j, :] (granules
// of `granule` input features, as matmul_prepared_fixed cuts them), and to_fixed(weight_tj * b[e_tj])
// for a held bias. Each term depends on its slot and granule alone, so devices holding some experts
// (expert split) or some granules of every expert (tensor split) add up, in integers, to one
// device's bits.  acc: [n_tokens, w.rows].
void expert_matmul_sum_fixed(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                             int64_t granule, int64_t* acc, ThreadPool& pool, MoeScratch& s);
// Scalar references (matmul_ref per slot, the sum in slot order).
void expert_matmul_ref(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                       float* y);
void expert_matmul_sum_ref(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                           float* y);

// sigmoid(g), as sigmoid_scale applies it (--exact scales partial sums by the same floats).
inline float sigmoid_gate(float g) { return 1.f / (1.f + std::exp(-g)); }
// y[t, i] = x[t, i] * sigmoid(gate) over n values a token, with gates_per_token 1 (a token's one
// gate g[t]: qwen2moe's shared expert) or n (each value's own g[t, i]: Qwen 3.5's gated attention
// output). y may alias x.
void sigmoid_scale(const float* x, const float* g, float* y, int64_t n_tokens, int64_t n, int64_t gates_per_token = 1);
void sigmoid_scale_ref(const float* x, const float* g, float* y, int64_t n_tokens, int64_t n,
                       int64_t gates_per_token = 1);

}  // namespace weft::kernels
