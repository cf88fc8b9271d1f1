// Matrix products against a (possibly quantized) weight matrix.
#pragma once

#include "core/dtype.h"
#include "core/thread_pool.h"

#include <cstdint>
#include <vector>

namespace weft::kernels {

// A weight matrix in ggml layout: `rows` rows of `cols` elements, each row `row_stride` bytes.
// y = W x computes one output per row.
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
};

// Per-thread-pool scratch reused across calls, so decode allocates nothing per token.
struct MatmulScratch {
  std::vector<uint8_t> act;  // activations converted to vec_dot_type
};

// y[t * ldy + r] = sum_k W[r, k] * x[t * ldx + k]  for r < W.rows, t < n_tokens.
// Decode (n_tokens == 1) streams each weight byte once; prompts use a tiled path.
void matmul(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy,
            ThreadPool& pool, MatmulScratch& scratch);

// Scalar reference of the same product (dequantize rows, accumulate in double).
void matmul_ref(const WeightMatrix& w, const float* x, int64_t ldx, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace weft::kernels
