// Matrix products against a (possibly quantized) weight matrix.
#pragma once

#include "core/dtype.h"
#include "core/thread_pool.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace weft::kernels {

// How a matrix's bytes are laid out: ggml's rows, or panels of 16 rows repacked once at load
// (repack) so that every product reads them in place instead of transposing them per call.
enum class WeightLayout : uint8_t { Rows, Panels };

// A weight matrix: `rows` rows of `cols` elements, each row `row_stride` bytes in ggml layout (or
// the same bytes as panels, see WeightLayout). y = W x computes one output per row.
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
  WeightLayout layout = WeightLayout::Rows;
  // Panels: bytes from one panel to the next; 0 for panels of exactly `cols` columns. A view of
  // some columns of a repacked matrix (matmul_fixed's granules) keeps the whole matrix's stride.
  size_t panel_stride = 0;
  // Batches through the same tiles as one token's calls, never a type's panels unpacked per call
  // (those sum a block's scales in floats): --exact, whose tokens' bits may not depend on their
  // step's token count.
  bool batch_invariant = false;
};

// Panels: weights streamed every step can be stored as 16-row panels in the layout the int8 GEMM
// reads (the legacy types Q4_0 .. Q8_0: the same bytes per block as ggml's, rows interleaved; see
// gemm_q8.h). Decode and
// batches then share one kernel that needs no per-call unpacking (llama.cpp's CPU "repack" buffers
// do the same). Only where this CPU's kernel level has a panel GEMM for the type.
bool can_repack(const WeightMatrix& w);
size_t repacked_bytes(const WeightMatrix& w);
// Writes w (Rows layout; any row_stride, e.g. a column slice of a wider matrix) as panels into dst
// (repacked_bytes(w), 64-byte aligned) and returns the matrix over them.
// With a pool, its threads repack disjoint panels (load time: at 8b-shape the scalar repack of
// the K-quants ran for seconds on one thread).
WeightMatrix repack(const WeightMatrix& w, uint8_t* dst, ThreadPool* pool = nullptr);

// Per-thread-pool scratch reused across calls, so decode allocates nothing per token.
struct MatmulScratch {
  std::vector<uint8_t> act;  // activations converted to vec_dot_type
};

// y[t * ldy + r] = sum_k W[r, k] * x[t * ldx + k]  for r < W.rows, t < n_tokens.
// Decode (n_tokens == 1) streams each weight byte once; prompts use a tiled path.
// Same as prepare_activations then matmul_prepared.
void matmul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
            ThreadPool& pool, MatmulScratch& scratch);

// The two halves of matmul, so that matmuls reading one input (Q, K and V; gate and up) convert it
// once: matmuls whose activation_layout is equal for the same x and n_tokens can share one
// prepare_activations, each then running matmul_prepared (x is still read when the layout is f32).
int activation_layout(const WeightMatrix& w, int64_t n_tokens);
// `produce(t)`, when given, first writes token t's row of x: a producer fused with the conversion
// (RMSNorm), so each row is converted while it is still in L1 and the pool is woken once for both.
using RowProducer = std::function<void(int64_t t)>;
void prepare_activations(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, ThreadPool& pool,
                         MatmulScratch& scratch, const RowProducer& produce = {});
void matmul_prepared(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
                     ThreadPool& pool, MatmulScratch& scratch);

// The product in fixed point (kernels/fixed_point.h), for the reductions a split cuts: the K axis in
// granules of `granule` columns (the last one may be shorter), each granule's float partial computed
// as matmul_prepared computes a whole product, then acc[t * ldacc + r] += to_fixed(partial). A device
// holding some of the granules, summed with the others' in integers, gets the same bits as one
// device holding all of them. Activations prepared as for matmul_prepared. Where `scale` is set,
// token t's partials are multiplied by scale[t] first (an expert's route weight).
void matmul_prepared_fixed(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, int64_t granule,
                           int64_t* acc, int64_t ldacc, ThreadPool& pool, MatmulScratch& scratch,
                           const float* scale = nullptr);

// Scalar reference of the same product (dequantize rows, accumulate in double).
void matmul_ref(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace weft::kernels
