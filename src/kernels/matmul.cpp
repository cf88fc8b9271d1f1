// y = W x over a thread pool. Matmuls are where nearly all of a forward pass goes: decode is
// bound by streaming the weights from memory once, prompts by reusing each weight tile for
// many tokens while it sits in cache.
#include "kernels/matmul.h"

#include "core/error.h"
#include "kernels/fixed_point.h"
#include "kernels/gemm_q8.h"
#include "kernels/quants.h"

#include <algorithm>
#include <vector>

namespace weft::kernels {
namespace {

// Threads own row ranges aligned to 16 rows: 16 f32 outputs are one 64-byte line, so two threads
// never write the same line of y (y from the allocator is at least 64-byte aligned).
constexpr int64_t kRowAlign = 16;
static_assert(kRowAlign % gemm::kPanelRows == 0, "GEMM row ranges start on a panel");
// Prompt tiles: a weight tile of about this many bytes stays in L2 while every token of a token
// tile passes over it; a token tile's activations (64 rows of ~1 KiB per 1024 columns) fit in L2 too.
constexpr size_t kWeightTileBytes = 96 * 1024;
constexpr int64_t kTokenTile = 64;
// From this many tokens the blocked GEMM (gemm_q8.h) beats rows_dot per token, although it
// unpacks each weight panel once per call: BM_matmul4_* (1 thread, 5632 x 2048) took 1.3 vs
// 1.9 ms for Q4_0, 1.9 vs 2.5 ms for Q4_K, and about the same for Q8_0 and Q6_K.
constexpr int64_t kGemmMinTokens = 4;
// Row ranges go to the threads in chunks of about 1/kStealChunks of a thread's share, which a thread
// that finishes early takes from the back of a slower one's range (ThreadPool::parallel_steal).
constexpr int64_t kStealChunks = 16;
// matmul_prepared_fixed's bands: two panels, as the one-token pair tiles read them.
constexpr int64_t kFixedBandRows = 2 * gemm::kPanelRows;

void check_shapes(const WeightMatrix& w, int64_t ldx, int64_t n_tokens, int64_t ldy) {
  WEFT_ASSERT(w.rows >= 0 && w.cols >= 0 && n_tokens >= 0);
  WEFT_ASSERT(w.cols % block_size(w.type) == 0);
  WEFT_ASSERT(w.row_stride >= row_bytes(w.type, w.cols));
  WEFT_ASSERT(n_tokens <= 1 || (ldx >= w.cols && ldy >= w.rows));
}

// Activations in the format the kernels take: f32 rows used in place, or converted into scratch.
struct ActRows {
  const uint8_t* data;
  size_t stride;  // bytes between tokens
};

// The rows rows_dot reads for x (cols values a token): x itself where the type takes f32, else its
// conversion in scratch (prepare_activations).
ActRows act_rows(const TypeKernels& k, const float* x, int64_t ldx, int64_t cols, const MatmulScratch& scratch) {
  if (k.act_type == DType::F32) return {reinterpret_cast<const uint8_t*>(x), static_cast<size_t>(ldx) * sizeof(float)};
  return {scratch.act.data(), row_bytes(k.act_type, cols)};
}

// Rows [r0, r0 + nr) x tokens [t0, t1) through rows_dot, one token at a time: the prompt path of
// types without a GEMM panel (float weights, the ref level).
void prompt_block(const TypeKernels& k, const WeightMatrix& w, const ActRows& act, int64_t r0, int64_t nr, int64_t t0,
                  int64_t t1, float* y, int64_t ldy) {
  const size_t ws = w.row_stride;
  for (int64_t t = t0; t < t1; ++t)
    k.rows_dot(w.cols, nr, w.data + r0 * ws, ws, act.data + t * act.stride, y + t * ldy + r0);
}

gemm::GemmFn gemm_kernel(const TypeKernels& k, const WeightMatrix& w, int64_t n_tokens) {
  // The GEMM of the level the activations are quantized at (k.quantize_act); a repacked matrix has
  // no other kernel (repack only makes one where find_repacked has it). Batches at the Avx512 level
  // run on AMX tiles where the CPU has them. A batch-invariant matrix left in rows takes rows_dot
  // for any token count, as one token does.
  if (w.batch_invariant && w.layout != WeightLayout::Panels) return nullptr;
  if (n_tokens >= gemm::amx_min_tokens(w.type))
    if (const gemm::GemmFn amx = gemm::find_amx(k.isa, w)) return amx;
  if (w.layout == WeightLayout::Panels) return gemm::find_repacked(k.isa, w.type);
  return n_tokens < kGemmMinTokens ? nullptr : gemm::find(k.isa, k.type);
}

// Layouts of converted activations: a row per token in act_type (rows_dot), or the GEMM's
// block-major ActBlocks, whose offsets depend on the weight type.
constexpr int kGemmLayouts = 1000;

}  // namespace

int activation_layout(const WeightMatrix& w, int64_t n_tokens) {
  const TypeKernels& k = kernels_for(w.type);
  if (gemm_kernel(k, w, n_tokens)) return kGemmLayouts + static_cast<int>(w.type);
  return static_cast<int>(k.act_type);
}

void prepare_activations(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, ThreadPool& pool,
                         MatmulScratch& scratch, const RowProducer& produce) {
  if (n_tokens <= 0) return;
  const TypeKernels& k = kernels_for(w.type);
  const int64_t n = w.cols;
  if (gemm_kernel(k, w, n_tokens)) {  // quantized per token, then spread into blocks across tokens
    const size_t act_bytes = sizeof(gemm::ActBlock) * (n / gemm::kQK) * n_tokens;
    if (scratch.act.size() < act_bytes) scratch.act.resize(act_bytes);
    auto* act = reinterpret_cast<gemm::ActBlock*>(scratch.act.data());
    const size_t row_bytes_act = row_bytes(k.act_type, n);
    for_each_index(pool, n_tokens, [&](int64_t t) {
      thread_local std::vector<uint8_t> row;
      if (row.size() < row_bytes_act) row.resize(row_bytes_act);
      if (produce) produce(t);
      gemm::quantize_act_blocks(k, x + t * ldx, n, act + t, n_tokens, row.data());
    });
    return;
  }
  if (k.act_type == DType::F32) {  // read in place
    if (produce) for_each_index(pool, n_tokens, produce);
    return;
  }
  const size_t stride = row_bytes(k.act_type, n);
  if (scratch.act.size() < stride * n_tokens) scratch.act.resize(stride * n_tokens);
  uint8_t* act = scratch.act.data();
  for_each_index(pool, n_tokens, [&](int64_t t) {
    if (produce) produce(t);
    k.quantize_act(x + t * ldx, act + t * stride, n);
  });
}

void matmul_prepared(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
                     ThreadPool& pool, MatmulScratch& scratch) {
  check_shapes(w, ldx, n_tokens, ldy);
  if (w.rows == 0 || n_tokens == 0) return;
  const TypeKernels& k = kernels_for(w.type);
  if (const gemm::GemmFn gemm = gemm_kernel(k, w, n_tokens)) {  // each thread over its 16-row aligned panels
    const auto* act = reinterpret_cast<const gemm::ActBlock*>(scratch.act.data());
    pool.parallel_steal(w.rows, pool.steal_chunk(w.rows, kRowAlign, kStealChunks),
                        [&](int64_t b, int64_t e) { gemm(w, b, e, act, n_tokens, y, ldy); });
    return;
  }
  const int64_t n = w.cols;
  const size_t ws = w.row_stride;
  const ActRows act = act_rows(k, x, ldx, n, scratch);

  if (n_tokens == 1) {  // decode: each thread streams its rows once, several rows per pass
    pool.parallel_steal(w.rows, pool.steal_chunk(w.rows, kRowAlign, kStealChunks),
                        [&](int64_t b, int64_t e) { k.rows_dot(n, e - b, w.data + b * ws, ws, act.data, y + b); });
    return;
  }

  // Prompt: each thread takes a row range; within it, a tile of tile_rows weight rows is
  // reused by every token of a token tile before moving on, so weights come from memory
  // n_tokens / kTokenTile times instead of n_tokens times.
  const int64_t tile_rows = std::max<int64_t>(4, static_cast<int64_t>(kWeightTileBytes / ws) / 4 * 4);
  pool.parallel_steal(w.rows,
                      std::max(tile_rows / kRowAlign * kRowAlign, pool.steal_chunk(w.rows, kRowAlign, kStealChunks)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
                          const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
                          for (int64_t r0 = b; r0 < e; r0 += tile_rows)
                            prompt_block(k, w, act, r0, std::min(tile_rows, e - r0), t0, t1, y, ldy);
                        }
                      });
}

namespace {

// Rows [r0, r1) and columns [k0, k1) of w as a matrix of their own: r0 on a panel, k0 on a block
// (of a repacked super-block type: on a super-block).
WeightMatrix view(const WeightMatrix& w, int64_t r0, int64_t r1, int64_t k0, int64_t k1) {
  WeightMatrix v = w;
  v.rows = r1 - r0;
  v.cols = k1 - k0;
  if (w.layout == WeightLayout::Panels) {
    v.data = gemm::panel_at(w, r0) + gemm::repacked_panel_bytes(w.type, k0);
    v.panel_stride = gemm::panel_stride(w);
    v.row_stride = row_bytes(w.type, v.cols);
  } else {
    v.data = w.data + r0 * w.row_stride + row_bytes(w.type, k0);
  }
  return v;
}

}  // namespace

void matmul_prepared_fixed(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, int64_t granule,
                           int64_t* acc, int64_t ldacc, ThreadPool& pool, MatmulScratch& scratch, const float* scale) {
  check_shapes(w, ldx, n_tokens, ldacc);
  WEFT_ASSERT(granule > 0 && granule % block_size(w.type) == 0);
  if (w.rows == 0 || n_tokens == 0) return;
  const TypeKernels& k = kernels_for(w.type);
  const gemm::GemmFn gemm = gemm_kernel(k, w, n_tokens);
  WEFT_ASSERT(!gemm || granule % gemm::kQK == 0);
  const auto* blocks = reinterpret_cast<const gemm::ActBlock*>(scratch.act.data());
  const ActRows act = act_rows(k, x, ldx, w.cols, scratch);
  // Each thread's rows a band of panels at a time, and each band granule by granule: a band's
  // granules lie one after another in memory (panels hold their blocks in K order), so the weights
  // still stream in order. A granule's partials of all tokens are added to acc at once.
  pool.parallel_steal(w.rows, pool.steal_chunk(w.rows, kRowAlign, kStealChunks), [&](int64_t b, int64_t e) {
    thread_local std::vector<float> part;
    for (int64_t b0 = b; b0 < e; b0 += kFixedBandRows) {
      const int64_t b1 = std::min(e, b0 + kFixedBandRows), nr = b1 - b0;
      if (part.size() < static_cast<size_t>(nr * n_tokens)) part.resize(static_cast<size_t>(nr * n_tokens));
      for (int64_t k0 = 0; k0 < w.cols; k0 += granule) {
        const int64_t k1 = std::min(w.cols, k0 + granule);
        const WeightMatrix v = view(w, b0, b1, k0, k1);
        if (gemm) {
          gemm(v, 0, nr, blocks + k0 / gemm::kQK * n_tokens, n_tokens, part.data(), nr);
        } else {
          const size_t a0 = row_bytes(k.act_type, k0);
          for (int64_t t = 0; t < n_tokens; ++t)
            k.rows_dot(v.cols, nr, v.data, v.row_stride, act.data + t * act.stride + a0, part.data() + t * nr);
        }
        for (int64_t t = 0; t < n_tokens; ++t) {
          float* pt = part.data() + t * nr;
          if (scale)
            for (int64_t r = 0; r < nr; ++r) pt[r] *= scale[t];
          add_fixed(pt, acc + t * ldacc + b0, nr);
        }
      }
    }
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
            ThreadPool& pool, MatmulScratch& scratch) {
  check_shapes(w, ldx, n_tokens, ldy);
  if (w.rows == 0 || n_tokens == 0) return;
  prepare_activations(w, x, ldx, n_tokens, pool, scratch);
  matmul_prepared(w, x, ldx, n_tokens, y, ldy, pool, scratch);
}

bool can_repack(const WeightMatrix& w) {
  return w.layout == WeightLayout::Rows && w.cols % gemm::kQK == 0 && gemm::has_repacked(w.type) &&
         gemm::find_repacked(kernels_for(w.type).isa, w.type);
}

size_t repacked_bytes(const WeightMatrix& w) { return gemm::repacked_bytes(w); }

WeightMatrix repack(const WeightMatrix& w, uint8_t* dst, ThreadPool* pool) {
  WEFT_ASSERT(can_repack(w) && reinterpret_cast<uintptr_t>(dst) % 64 == 0);
  const int64_t n_panels = (w.rows + gemm::kPanelRows - 1) / gemm::kPanelRows;
  if (pool && pool->size() > 1)
    pool->parallel_for(n_panels, 1, [&](int64_t p0, int64_t p1) { gemm::repack(w, dst, p0, p1); });
  else
    gemm::repack(w, dst, 0, n_panels);
  WeightMatrix out = w;
  out.data = dst;
  out.row_stride = row_bytes(w.type, w.cols);
  out.layout = WeightLayout::Panels;
  return out;
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy) {
  check_shapes(w, ldx, n_tokens, ldy);
  WEFT_ASSERT(w.layout == WeightLayout::Rows);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row_ref(w.type, w.data + r * w.row_stride, row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * ldx;
      double s = 0;
      for (int64_t i = 0; i < w.cols; ++i) s += static_cast<double>(row[i]) * xt[i];
      y[t * ldy + r] = static_cast<float>(s);
    }
  }
}

}  // namespace weft::kernels
