// Internal to src/kernels: the blocked int8 GEMM that prompts (n_tokens > 1) run on.
//
// Why a second path beside rows_dot: rows_dot unpacks every weight block again for every token
// and turns each block's int dot into float at once (a cvt, a mul and an fma per two dpbusd).
// Here a panel of kPanelRows weight rows is unpacked once per call into u8 values laid out with
// one zmm dword lane per row ("row-interleaved"), so one dpbusd multiplies 16 rows by four
// values of one token (broadcast from memory) and a whole 32-value block sums in the int32
// lane before one float step per 16 rows x 8 dpbusd. The panel (~36 KiB per 2048 columns of
// Q4_0) stays in L1/L2 while every token of a chunk passes over it.
//
// Every weight block of 32 values becomes  x = sc * q + mn  with q unsigned (0..255), sc and mn
// float per row (mn folded into an int offset where it is a power-of-two multiple of sc):
//   Q4_0: q = nibble, int offset -8        Q5_0: q = 5 bits, offset -16   Q8_0: q = qs + 128, -128
//   Q4_1/Q5_1/Q4_K/Q5_K: float min mn      Q6_K: two scales (16 values each), offset -32
// so dot = sum_blocks d_a * sc * (sum q a + corr) + mn * s_a, with corr = -offset * sum(a) and
// s_a = d_a * sum(a) taken from the activation block (ActBlock below).
#pragma once

#include "core/dtype.h"
#include "kernels/matmul.h"

#include <cstddef>
#include <cstdint>

namespace weft::kernels::gemm {

constexpr int kPanelRows = 16;  // one zmm lane per row
constexpr int kQK = 32;         // values per panel block, every type
constexpr int kGroups = 8;      // dwords (4 values) per block and row
// Tokens per micro-kernel call: 8 int32 + 8 float accumulators leave registers for the weights.
constexpr int kTileTokens = 8;

// How a weight type's blocks are stored in a panel.
struct PanelFormat {
  int n_scales = 1;      // 1: one scale per 32 values; 2: one per 16 (Q6_K)
  bool has_min = false;  // a float mn per block (the _1 types and Q4_K/Q5_K)
  bool has_corr = false; // the int offset term corr of the activation block applies
  // Per block: kGroups x 64 bytes of q (group g, lane r = values 4g..4g+3 of row r), then
  // n_scales x 16 floats of sc, then 16 floats of mn when has_min.
  size_t block_bytes() const { return kGroups * 64 + 64 * static_cast<size_t>(n_scales + (has_min ? 1 : 0)); }
};

// Whether t has a panel format (F32/F16/BF16 do not: their prompt path stays rows_dot).
bool has_panel(DType t);
PanelFormat panel_format(DType t);

// One activation block of one token, in the order the micro-kernel reads it.
struct ActBlock {
  int8_t q[kQK];  // quantized values, as in the Q8_0/Q8_1/Q8_K row
  float d;        // activation scale of the block
  float s;        // d * sum(q) (has_min types)
  int32_t c0;     // -offset * sum(q) over values 0..31 (n_scales 1) or 0..15 (n_scales 2)
  int32_t c1;     // -offset * sum(q) over values 16..31 (n_scales 2)
};
static_assert(sizeof(ActBlock) == 48);

// Activation blocks of one token from its row in vec_dot_type(weight) format (n values), written
// to out[b * n_tokens] for block b: blocks are stored block-major so that the tokens of a tile
// are adjacent.
void prepare_act_row(DType weight, const void* act_row, int64_t n, ActBlock* out, int64_t n_tokens);

// Unpacks rows [r0, r0 + n_rows) of w (n_rows <= kPanelRows; absent rows read as zero) into
// panel, which holds cols / 32 blocks of panel_format(w.type).block_bytes().
void pack_panel(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel);

// y[t * ldy + r] = dot(row r, token t) for rows [r0, r1) (r0 a multiple of kPanelRows) and
// tokens [0, n_tokens), act as written by prepare_act_row for n_tokens tokens.
using GemmFn = void (*)(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
                        int64_t ldy);
// Scalar reference over the same panels (the definition the SIMD kernels are checked against).
void gemm_ref(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
              int64_t ldy);
// AVX-512 VNNI; only call when cpu_features().avx512. nullptr for a type without a panel.
GemmFn find_avx512(DType t);
// AVX2 + FMA; only call when cpu_features().avx2. nullptr also for Q8_0 (see gemm_avx2.cpp).
GemmFn find_avx2(DType t);

}  // namespace weft::kernels::gemm
