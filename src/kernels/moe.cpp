// Mixture-of-experts kernels (see moe.h). The expert matmuls group a step's token slots by expert
// and run one matmul per selected expert over its tokens (gathered side by side), so a prompt reads
// each expert's weights once and decode reads only the k experts it selected.
#include "kernels/moe.h"

#include "core/error.h"
#include "kernels/fixed_point.h"
#include "kernels/gemm_q8.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

namespace weft::kernels {
namespace {

// Grows a scratch buffer, never shrinks it: a vector shrunk and regrown zero-fills the regrown
// part again, on every expert of every step.
template <typename T>
T* at_least(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// fn(b, e) over [0, n): inline for a decode step's few entries (waking the pool would cost more
// than converting or copying them), else split over the pool.
constexpr int64_t kInlineEntries = 16;
template <typename Fn>
void over_entries(int64_t n, ThreadPool& pool, Fn&& fn) {
  if (n <= kInlineEntries) return fn(int64_t{0}, n);
  pool.parallel_for(n, 1, fn);
}

// llama.cpp clamps the sum of the selected weights to the smallest normal f16 before dividing.
constexpr float kMinWeightSum = 6.103515625e-5f;

constexpr int64_t kMaxGroups = 64;  // expert groups per layer (DeepSeek V3: 8)

// The k largest of p[n_expert] (descending, ties to the lower id) and their weights into routes.
// k passes of an argmax: k is a handful, n_expert at most a few hundred.
void select_top_k(const float* p, int64_t n_expert, int64_t k, float* routes) {
  WEFT_ASSERT(k >= 1 && k <= n_expert);
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j && !taken; ++i) taken = route_id(routes, i) == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;  // strict: the lower id wins a tie
    }
    routes[j] = static_cast<float>(best);
    routes[k + j] = p[best];
  }
}

// Slots (t * k + j) routed to each expert of the stack, grouped by expert, tokens ascending.
void group_slots(const ExpertStack& w, const float* routes, int64_t k, int64_t n_tokens, MoeScratch& s) {
  s.begin.assign(w.n + 1, 0);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < k; ++j)
      if (const int64_t e = route_id(routes + t * 2 * k, j); w.holds(e)) ++s.begin[e - w.first + 1];
  for (int64_t i = 0; i < w.n; ++i) s.begin[i + 1] += s.begin[i];
  s.slots.resize(s.begin[w.n]);
  s.expert.resize(s.begin[w.n]);
  std::vector<int64_t> next(s.begin.begin(), s.begin.end() - 1);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < k; ++j)
      if (const int64_t e = route_id(routes + t * 2 * k, j); w.holds(e)) {
        const int64_t at = next[e - w.first]++;
        s.slots[at] = t * k + j;
        s.expert[at] = e - w.first;
      }
}

// Whether every expert's tokens go through rows_dot one token at a time (no GEMM panel): then
// all of them can run in one pass of the pool.
bool rows_path_only(const ExpertStack& w, const MoeScratch& s) {
  const int rows_layout = static_cast<int>(kernels_for(w.w.type).act_type);
  for (int64_t i = 0; i < w.n; ++i)
    if (const int64_t m = s.begin[i + 1] - s.begin[i]; m > 1 && activation_layout(w.w, m) != rows_layout) return false;
  return true;
}

// For each entry p of s.slots, the first entry whose input row is the same (the gate and up
// products of one token give all of its k slots the same row): that row is converted once.
// Sorted by row, stable, so each run of equal rows starts at its first entry.
template <typename RowOf>
const std::vector<int64_t>& distinct_rows(MoeScratch& s, RowOf row_of) {
  const int64_t n = static_cast<int64_t>(s.slots.size());
  s.order.resize(n);
  for (int64_t p = 0; p < n; ++p) s.order[p] = p;
  std::stable_sort(s.order.begin(), s.order.end(), [&](int64_t a, int64_t b) {
    return std::less<const float*>()(row_of(s.slots[a]), row_of(s.slots[b]));
  });
  s.src.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = s.order[i];
    const bool same = i > 0 && row_of(s.slots[p]) == row_of(s.slots[s.order[i - 1]]);
    s.src[p] = same ? s.src[s.order[i - 1]] : p;
  }
  return s.src;
}

// A stack of panels, decode and prompts alike: each distinct input row converted once to the GEMM's
// blocks, straight into its expert's batch (block-major, as the GEMM reads one), then every
// (expert, panel) through the panel kernel in one pass of the pool, split by work (panels x
// tokens) so that no thread waits on another's crowded expert.
template <typename RowOf>
void grouped_panels(const ExpertStack& w, ThreadPool& pool, MoeScratch& s, RowOf row_of) {
  const TypeKernels& tk = kernels_for(w.w.type);
  const gemm::GemmFn gemm = gemm::find_repacked(tk.isa, w.w.type);
  WEFT_ASSERT(gemm && w.rows % gemm::kPanelRows == 0);
  // Experts with enough tokens run on AMX tiles where matmul would (same ActBlocks).
  const gemm::GemmFn amx = gemm::find_amx(tk.isa, w.expert(w.first));
  const int64_t cols = w.w.cols, rows = w.rows, n = static_cast<int64_t>(s.slots.size()), nb = cols / gemm::kQK;
  auto* act = reinterpret_cast<gemm::ActBlock*>(at_least(s.act, sizeof(gemm::ActBlock) * nb * n));
  // Entry p is token p - begin[i] of expert i's batch of m(i) tokens.
  auto m = [&](int64_t i) { return s.begin[i + 1] - s.begin[i]; };
  auto blocks_of = [&](int64_t p) { return act + s.begin[s.expert[p]] * nb + (p - s.begin[s.expert[p]]); };
  const std::vector<int64_t>& src = distinct_rows(s, row_of);
  const size_t row_act = row_bytes(tk.act_type, cols);
  over_entries(n, pool, [&](int64_t b, int64_t e) {
    thread_local std::vector<uint8_t> row;
    at_least(row, row_act);
    for (int64_t p = b; p < e; ++p) {
      if (src[p] != p) continue;
      gemm::quantize_act_blocks(tk, row_of(s.slots[p]), cols, blocks_of(p), m(s.expert[p]), row.data());
    }
  });
  bool shared = false;  // some entries read another's converted row
  for (int64_t p = 0; p < n && !shared; ++p) shared = src[p] != p;
  if (shared)
    over_entries(n, pool, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        if (src[p] == p) continue;
        const int64_t mp = m(s.expert[p]), mq = m(s.expert[src[p]]);
        const gemm::ActBlock* from = blocks_of(src[p]);
        gemm::ActBlock* to = blocks_of(p);
        for (int64_t blk = 0; blk < nb; ++blk) to[blk * mp] = from[blk * mq];
      }
    });
  const int64_t panels = rows / gemm::kPanelRows, work = n * panels;  // expert i's panel q: m(i) units
  pool.parallel_steal(work, pool.steal_chunk(work, 1, 16), [&](int64_t lo, int64_t hi) {  // panels starting in [lo, hi)
    for (int64_t i = 0; i < w.n; ++i) {
      const int64_t mi = m(i), base = s.begin[i] * panels;
      if (mi == 0 || base >= hi || base + panels * mi <= lo) continue;
      const int64_t q0 = std::clamp<int64_t>((lo - base + mi - 1) / mi, 0, panels);
      const int64_t q1 = std::clamp<int64_t>((hi - base + mi - 1) / mi, 0, panels);
      if (q0 < q1)
        (amx && mi >= gemm::amx_min_tokens(w.w.type) ? amx : gemm)(w.expert(w.first + i), q0 * gemm::kPanelRows,
                                                                   q1 * gemm::kPanelRows, act + s.begin[i] * nb, mi,
                                                                   s.y.data() + s.begin[i] * rows, rows);
    }
  });
}

// Decode and small batches: the rows of every (selected expert, token) pair, back to back, split
// over the pool in one pass (a pool wake per expert would cost more than a small expert's rows).
// The results land in s.y, one row of w.rows per entry of s.slots.
template <typename RowOf>
void fused_rows(const ExpertStack& w, ThreadPool& pool, MoeScratch& s, RowOf row_of) {
  const TypeKernels& tk = kernels_for(w.w.type);
  const int64_t cols = w.w.cols, rows = w.rows, n = static_cast<int64_t>(s.slots.size());
  const size_t act_stride = row_bytes(tk.act_type, cols);
  const std::vector<int64_t>& src = distinct_rows(s, row_of);
  if (tk.act_type != DType::F32) {
    at_least(s.act, act_stride * n);
    for (int64_t p = 0; p < n; ++p)
      if (src[p] == p) tk.quantize_act(row_of(s.slots[p]), s.act.data() + p * act_stride, cols);
  }
  const size_t ws = w.w.row_stride;
  pool.parallel_steal(n * rows, pool.steal_chunk(n * rows, 16, 16), [&](int64_t b, int64_t e) {
    for (int64_t p = b / rows; p * rows < e; ++p) {
      const int64_t r0 = std::max(b, p * rows) - p * rows, r1 = std::min(e, (p + 1) * rows) - p * rows;
      const void* act =
          tk.act_type == DType::F32 ? static_cast<const void*>(row_of(s.slots[p])) : s.act.data() + src[p] * act_stride;
      const uint8_t* we = w.w.data + (s.expert[p] * rows + r0) * ws;
      tk.rows_dot(cols, r1 - r0, we, ws, act, s.y.data() + p * rows + r0);
    }
  });
}

// For each held expert that some slot selected, its matrix times the input rows of its slots
// (row_of(slot)): the product of entry p of s.slots lands in s.y at p * w.rows.
template <typename RowOf>
void expert_products(const ExpertStack& w, const float* routes, int64_t k, int64_t n_tokens, ThreadPool& pool,
                     MoeScratch& s, RowOf row_of) {
  group_slots(w, routes, k, n_tokens, s);
  const int64_t cols = w.w.cols, rows = w.rows;
  at_least(s.y, s.slots.size() * rows);
  if (w.w.layout == WeightLayout::Panels) return grouped_panels(w, pool, s, row_of);
  if (rows_path_only(w, s)) return fused_rows(w, pool, s, row_of);
  for (int64_t i = 0; i < w.n; ++i) {
    const int64_t b = s.begin[i], m = s.begin[i + 1] - b;
    if (m == 0) continue;  // an expert nobody chose is never read
    const float* x = row_of(s.slots[b]);
    if (m > 1) {
      at_least(s.x, m * cols);
      for (int64_t r = 0; r < m; ++r) std::memcpy(&s.x[r * cols], row_of(s.slots[b + r]), cols * sizeof(float));
      x = s.x.data();
    }
    matmul(w.expert(w.first + i), x, cols, m, s.y.data() + b * rows, rows, pool, s.mm);
  }
}

}  // namespace

bool can_repack_experts(const WeightMatrix& one) {
  return can_repack(one) && one.rows % gemm::kPanelRows == 0 && repacked_bytes(one) % 64 == 0;
}

WeightMatrix ExpertStack::expert(int64_t id) const {
  WEFT_ASSERT(holds(id));
  WeightMatrix m = w;
  m.rows = rows;
  // Each expert repacked on its own (can_repack_experts) takes its panels' bytes, which for the
  // K-quants are more than its rows'.
  m.data +=
      static_cast<size_t>(id - first) * (w.layout == WeightLayout::Panels ? repacked_bytes(m) : rows * w.row_stride);
  return m;
}

// The scores experts are chosen by (llama.cpp's build_moe_ffn): p plus the selection bias, and of
// expert groups only those of the best groups (a group's score: its two best), the rest -inf.
void selection_scores(const float* p, const MoeRouting& r, float* sel) {
  for (int64_t e = 0; e < r.n_expert; ++e) sel[e] = p[e] + (r.selection_bias ? r.selection_bias[e] : 0.f);
  if (r.n_groups <= 1) return;
  const int64_t per = r.n_expert / r.n_groups;
  float group_score[kMaxGroups];
  for (int64_t g = 0; g < r.n_groups; ++g) {
    const float* x = sel + g * per;
    const int64_t best = std::max_element(x, x + per) - x;
    float second = -INFINITY;
    for (int64_t e = 0; e < per; ++e)
      if (e != best) second = std::max(second, x[e]);
    group_score[g] = per > 1 ? x[best] + second : x[best];
  }
  bool kept[kMaxGroups] = {};
  for (int64_t u = 0; u < r.n_groups_used; ++u) {  // the best groups, ties to the lower index
    int64_t best = -1;
    for (int64_t g = 0; g < r.n_groups; ++g)
      if (!kept[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
    kept[best] = true;
  }
  for (int64_t g = 0; g < r.n_groups; ++g)
    if (!kept[g]) std::fill_n(sel + g * per, per, -INFINITY);
}

// SOFTMAX_WEIGHT: the selected logits (routes[k .. 2k)) become their softmax. p: 2 n_expert floats.
template <typename Softmax>
void route_token(const float* logits, const MoeRouting& r, float* p, float* routes, Softmax softmax_of) {
  std::copy(logits, logits + r.n_expert, p);
  if (r.sigmoid)
    for (int64_t e = 0; e < r.n_expert; ++e) p[e] = sigmoid_gate(p[e]);
  else if (!r.softmax_selected)
    softmax_of(p, r.n_expert);
  if (r.selection_bias || r.n_groups > 1) {
    float* sel = p + r.n_expert;
    selection_scores(p, r, sel);
    select_top_k(sel, r.n_expert, r.k, routes);
    for (int64_t j = 0; j < r.k; ++j) routes[r.k + j] = p[route_id(routes, j)];  // weighted unbiased
  } else {
    select_top_k(p, r.n_expert, r.k, routes);
  }
  if (r.softmax_selected) softmax_of(routes + r.k, r.k);
  if (r.norm) {
    float sum = 0;
    for (int64_t j = 0; j < r.k; ++j) sum += routes[r.k + j];
    for (int64_t j = 0; j < r.k; ++j) routes[r.k + j] /= std::max(sum, kMinWeightSum);
  }
  if (r.weights_scale > 0)
    for (int64_t j = 0; j < r.k; ++j) routes[r.k + j] *= r.weights_scale;
  if (r.expert_scale)
    for (int64_t j = 0; j < r.k; ++j) routes[r.k + j] *= r.expert_scale[static_cast<int64_t>(routes[j])];
}

void check_routing(const MoeRouting& r) {
  if (r.n_groups > 1 && (r.n_groups > kMaxGroups || r.n_expert % r.n_groups != 0 || r.n_groups_used < 1 ||
                         r.n_groups_used > r.n_groups || r.n_groups_used * (r.n_expert / r.n_groups) < r.k))
    fail("kernels", "moe_route: {} of {} groups over {} experts cannot hold {}", r.n_groups_used, r.n_groups,
         r.n_expert, r.k);
}

void moe_route(const float* logits, int64_t n_tokens, const MoeRouting& r, float* routes) {
  check_routing(r);
  std::vector<float> p(2 * r.n_expert);
  for (int64_t t = 0; t < n_tokens; ++t)
    route_token(logits + t * r.n_expert, r, p.data(), routes + t * 2 * r.k, [](float* v, int64_t n) { softmax(v, n); });
}

void moe_route_ref(const float* logits, int64_t n_tokens, const MoeRouting& r, float* routes) {
  check_routing(r);
  std::vector<float> p(2 * r.n_expert);
  auto softmax_double = [](float* v, int64_t n) {
    const double m = *std::max_element(v, v + n);
    double sum = 0;
    for (int64_t e = 0; e < n; ++e) sum += std::exp(v[e] - m);
    for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>(std::exp(v[e] - m) / sum);
  };
  for (int64_t t = 0; t < n_tokens; ++t)
    route_token(logits + t * r.n_expert, r, p.data(), routes + t * 2 * r.k, softmax_double);
}

namespace {

// Each slot's product (its input row_of(slot)) into its row of y, [n_tokens, k, w.rows]; zeros
// for the slots of experts held elsewhere.
template <typename RowOf>
void products_per_slot(const ExpertStack& w, const float* routes, int64_t k, int64_t n_tokens, float* y,
                       ThreadPool& pool, MoeScratch& s, RowOf row_of) {
  const int64_t rows = w.rows;
  for (int64_t t = 0; t < n_tokens; ++t)  // slots of experts held elsewhere stay zero
    for (int64_t j = 0; j < k; ++j)
      if (!w.holds(route_id(routes + t * 2 * k, j))) std::fill_n(y + (t * k + j) * rows, rows, 0.f);
  expert_products(w, routes, k, n_tokens, pool, s, row_of);
  const int64_t n = static_cast<int64_t>(s.slots.size());
  over_entries(n, pool, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      float* out = y + s.slots[p] * rows;
      std::memcpy(out, s.y.data() + p * rows, rows * sizeof(float));
      if (w.bias) add_inplace(out, w.bias + s.expert[p] * rows, rows);
    }
  });
}

}  // namespace

void expert_matmul(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens, float* y,
                   ThreadPool& pool, MoeScratch& s) {
  const int64_t cols = w.w.cols;
  products_per_slot(w, routes, k, n_tokens, y, pool, s, [&](int64_t slot) { return x + slot / k * cols; });
}

void head_matmul(const ExpertStack& w, const float* x, int64_t ldx, int64_t in_head, int64_t n_tokens, float* y,
                 ThreadPool& pool, MoeScratch& s) {
  const int64_t n = w.n;
  s.routes.resize(static_cast<size_t>(n_tokens * 2 * n));  // token t's slot h: head first + h, weight 1
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t h = 0; h < n; ++h) {
      s.routes[t * 2 * n + h] = static_cast<float>(w.first + h);
      s.routes[t * 2 * n + n + h] = 1.f;
    }
  products_per_slot(w, s.routes.data(), n, n_tokens, y, pool, s,
                    [&](int64_t slot) { return x + slot / n * ldx + slot % n * in_head; });
}

void expert_matmul_sum(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens, float* y,
                       ThreadPool& pool, MoeScratch& s) {
  const int64_t cols = w.w.cols, rows = w.rows;
  expert_products(w, routes, k, n_tokens, pool, s, [&](int64_t slot) { return x + slot * cols; });
  // Each token's products are added in ascending expert id (the order of s.slots), whatever the
  // thread count: the same sum on every run.
  s.entry.assign(n_tokens * k, -1);
  for (size_t p = 0; p < s.slots.size(); ++p) s.entry[s.slots[p]] = static_cast<int64_t>(p);
  const OpsKernels& ops = ops_kernels();
  over_entries(n_tokens, pool, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      thread_local std::vector<int64_t> mine;  // the token's entries
      mine.clear();
      for (int64_t j = 0; j < k; ++j)
        if (s.entry[t * k + j] >= 0) mine.push_back(s.entry[t * k + j]);
      std::sort(mine.begin(), mine.end());
      float* yt = y + t * rows;
      std::fill_n(yt, rows, 0.f);
      for (const int64_t p : mine) {
        float* r = s.y.data() + p * rows;  // ours to scale in place
        const int64_t slot = s.slots[p];
        if (w.bias) ops.add(r, w.bias + s.expert[p] * rows, rows);
        ops.scale(r, route_weight(routes + t * 2 * k, k, slot % k), rows);
        ops.add(yt, r, rows);
      }
    }
  });
}

void expert_matmul_sum_fixed(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                             int64_t granule, int64_t* acc, ThreadPool& pool, MoeScratch& s) {
  const int64_t cols = w.w.cols, rows = w.rows;
  group_slots(w, routes, k, n_tokens, s);
  for (int64_t i = 0; i < w.n; ++i) {
    const int64_t b = s.begin[i], m = s.begin[i + 1] - b;
    if (m == 0) continue;
    float* xs = at_least(s.x, m * cols);
    float* weights = at_least(s.y, m * (rows + 1));  // the slots' route weights, then a bias row
    for (int64_t r = 0; r < m; ++r) {
      const int64_t slot = s.slots[b + r];
      std::memcpy(xs + r * cols, x + slot * cols, cols * sizeof(float));
      weights[r] = route_weight(routes + slot / k * 2 * k, k, slot % k);
    }
    int64_t* products = at_least(s.fixed, m * rows);
    std::fill_n(products, m * rows, 0);
    const WeightMatrix e = w.expert(w.first + i);
    prepare_activations(e, xs, cols, m, pool, s.mm);
    matmul_prepared_fixed(e, xs, cols, m, granule, products, rows, pool, s.mm, weights);
    float* bias = weights + m;
    for (int64_t r = 0; r < m; ++r) {
      int64_t* at = acc + s.slots[b + r] / k * rows;
      if (w.bias) {
        for (int64_t o = 0; o < rows; ++o) bias[o] = weights[r] * w.bias[i * rows + o];
        add_fixed(bias, at, rows);
      }
      add_fixed_sums(products + r * rows, at, rows);
    }
  }
}

void expert_matmul_ref(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                       float* y) {
  const int64_t cols = w.w.cols, rows = w.rows;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      float* out = y + (t * k + j) * rows;
      const int64_t e = route_id(routes + t * 2 * k, j);
      if (w.holds(e)) {
        matmul_ref(w.expert(e), x + t * cols, cols, 1, out, rows);
        if (w.bias)
          for (int64_t i = 0; i < rows; ++i) out[i] += w.bias[(e - w.first) * rows + i];
      } else
        std::fill_n(out, rows, 0.f);
    }
}

void expert_matmul_sum_ref(const ExpertStack& w, const float* x, const float* routes, int64_t k, int64_t n_tokens,
                           float* y) {
  const int64_t cols = w.w.cols, rows = w.rows;
  std::vector<float> r(rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<double> acc(rows, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = route_id(routes + t * 2 * k, j);
      if (!w.holds(e)) continue;
      matmul_ref(w.expert(e), x + (t * k + j) * cols, cols, 1, r.data(), rows);
      const float* b = w.bias ? w.bias + (e - w.first) * rows : nullptr;
      for (int64_t i = 0; i < rows; ++i)
        acc[i] += static_cast<double>(route_weight(routes + t * 2 * k, k, j)) * (r[i] + (b ? b[i] : 0.f));
    }
    for (int64_t i = 0; i < rows; ++i) y[t * rows + i] = static_cast<float>(acc[i]);
  }
}

void sigmoid_scale(const float* x, const float* g, float* y, int64_t n_tokens, int64_t n, int64_t gates_per_token) {
  WEFT_ASSERT(gates_per_token == 1 || gates_per_token == n);
  if (gates_per_token == n) {
    for (int64_t i = 0; i < n_tokens * n; ++i) y[i] = x[i] * sigmoid_gate(g[i]);
    return;
  }
  const OpsKernels& ops = ops_kernels();
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (y != x) std::memcpy(y + t * n, x + t * n, n * sizeof(float));
    ops.scale(y + t * n, sigmoid_gate(g[t]), n);
  }
}

void sigmoid_scale_ref(const float* x, const float* g, float* y, int64_t n_tokens, int64_t n, int64_t gates_per_token) {
  WEFT_ASSERT(gates_per_token == 1 || gates_per_token == n);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < n; ++i) {
      const double gate = g[t * gates_per_token + (gates_per_token == 1 ? 0 : i)];
      y[t * n + i] = static_cast<float>(x[t * n + i] / (1.0 + std::exp(-gate)));
    }
}

}  // namespace weft::kernels
