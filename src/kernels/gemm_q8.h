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
//   Q3_K: two scales (16 values each), offset -4
//   IQ4_NL/IQ4_XS (repacked only): q = grid level + 128, one vpshufb of the index, offset -128
//   MXFP4 (repacked only): q = grid level + 12 (0 .. 24), the same vpshufb, offset -12; sc 2^(e - 128)
// so dot = sum_blocks d_a * sc * (sum q a + corr) + mn * s_a, with corr = -offset * sum(a) and
// s_a = d_a * sum(a) taken from the activation block (ActBlock below).
#pragma once

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/iquants_impl.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/quants_legacy.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace weft::kernels::gemm {

constexpr int kPanelRows = 16;  // one zmm lane per row
constexpr int kQK = 32;         // values per panel block, every type
constexpr int kGroups = 8;      // dwords (4 values) per block and row
// Tokens per micro-kernel call: 8 int32 + 8 float accumulators leave registers for the weights.
constexpr int kTileTokens = 8;

// How a weight type's blocks are stored in a panel.
struct PanelFormat {
  int n_scales = 1;       // 1: one scale per 32 values; 2: one per 16 (Q6_K)
  bool has_min = false;   // a float mn per block (the _1 types and Q4_K/Q5_K)
  bool has_corr = false;  // the int offset term corr of the activation block applies
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
  // -offset * sum(q) over values 0..31 (n_scales 1) or 0..15 (n_scales 2) and 16..31; for a type
  // with a min per 16 values (Q2_K), sum(q) over each half: its mins' terms.
  int32_t c0;
  int32_t c1;
};
static_assert(sizeof(ActBlock) == 48);
// Q2_K's half sums of a block (c0, c1: |c| <= 16 x 127) as the int16 pair (c0, c1) of a dword, for vpdpwssd.
inline int32_t half_sums(const ActBlock& a) {
  return static_cast<int32_t>(static_cast<uint16_t>(a.c0) | static_cast<uint32_t>(static_cast<uint16_t>(a.c1)) << 16);
}

// Activation blocks of one token from its row in vec_dot_type(weight) format (n values), written
// to out[b * n_tokens] for block b: blocks are stored block-major so that the tokens of a tile
// are adjacent.
void prepare_act_row(DType weight, const void* act_row, int64_t n, ActBlock* out, int64_t n_tokens);
// The int offset of the levels of a weight type whose panels have has_corr (0 for the others), taken
// off through ActBlock's c0 / c1.
constexpr int32_t act_offset(DType weight) {
  return weight == DType::Q4_0                                                          ? 8
         : weight == DType::Q5_0                                                        ? 16
         : weight == DType::Q6_K                                                        ? 32
         : weight == DType::Q3_K                                                        ? 4
         : weight == DType::Q8_0                                                        ? 128
         : weight == DType::IQ4_NL || weight == DType::IQ4_XS || weight == DType::MXFP4 ? iquants::grid_bias(weight)
                                                                                        : 0;
}
// prepare_act_row of the row k.quantize_act makes of the f32 row x (k: kernels_for(weight type) at
// some level): in one pass where k's level has one (legacy::act_blocks: the row conversion took
// half of a prompt's activation preparation), else through `row` (row_bytes(k.act_type, n) bytes).
void quantize_act_blocks(const TypeKernels& k, const float* x, int64_t n, ActBlock* out, int64_t n_tokens,
                         uint8_t* row);

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
// The GEMM of weight type t at ISA level I (gemm_pack.cpp, gemm_avx2.cpp, gemm_avx512.cpp);
// nullptr for a type without a panel and for Scalar (whose prompts run rows_dot). A SIMD
// level's kernel must only run where isa_supported().
template <Isa I>
GemmFn find(DType t);
template <>
GemmFn find<Isa::Scalar>(DType t);
template <>
GemmFn find<Isa::Avx2>(DType t);
template <>
GemmFn find<Isa::Avx512>(DType t);
// The same for a level chosen at run time; nullptr too where this CPU cannot run `isa`.
GemmFn find(Isa isa, DType t);

// ---- matrices repacked at load (WeightLayout::Panels) ----
//
// The legacy types as panels: panel p (rows 16p .. 16p + 15; rows past the matrix are zero) holds
// its 32-value blocks one after another, each repacked_block_bytes(type), ggml's bytes rearranged
// (same size) so that the kernel reads whole vectors with one dword lane per row:
//   Q5_0/Q5_1 first: 64 bytes, the fifth bits as a bit plane: bit g of byte 4r + i is the fifth bit
//     of value 4g + i of row r (bit 4g + i of its qh), moved to bit 4 of group g's levels by one
//     shift and or-ed in (and, or: one ternary-logic op on AVX-512);
//   Q4_0/Q4_1/Q5_0/Q5_1: 4 x 64 bytes whose lane r of vector k is bytes 4k .. 4k + 3 of row r's qs
//     (low nibbles: group k, high nibbles: group k + 4, as in ggml's block); unpacking is two ops
//     per vector in registers;
//   Q8_0: 8 x 64 bytes, lane r of vector g = qs[4g .. 4g + 3] of row r plus 128 (the unsigned levels
//     dpbusd takes, flipped once here instead of every call);
// then the 16 rows' fp16 scales d, then (Q4_1/Q5_1) their fp16 mins m. IQ4_NL: as Q4_0 (its block is
// Q4_0's, the nibbles grid indices). MXFP4: as IQ4_NL with the 16 rows' E8M0 bytes e for the fp16 d
// (ggml's 17 bytes a row: kept as bytes, since no fp16 holds 2^-128 .. 2^127; the readers make them
// floats in registers). IQ4_XS: per super-block the 16 rows' fp16 d, then 8 sub-blocks of indices as
// a Q4_0 block's and the rows' int8 scales (ls - 32).
// The K-quants as panels: per 256-value super-block a head of the 16 rows' fp16 d (Q4_K/Q5_K: then
// their fp16 dmin and their packed 6-bit scales and mins, below), then 8 sub-blocks of 32 values. A
// Q4_K/Q5_K sub-block is laid out as a Q4_0 / Q5_0 block above (its nibbles paired as Q4_0 pairs
// them: value i with value i + 16) without the scales; a Q6_K sub-block is the top
// two bits of its levels in two vectors (group g: bits 2 (g % 4) of byte 4r + i of vector g / 4)
// with the low four bits as a Q4_0 block between them, then the int8 scales of its two halves; a
// Q3_K sub-block is the third bits as a bit plane (as Q5's fifth bits: bit g of byte 4r + i for
// value 4g + i of row r), the two low bits of its levels laid out as Q6_K's top bits, then the int8
// scales (stored - 32) of its halves; its levels are 0 .. 7 with offset -4. Every block's vectors
// lie in the order its groups first read them (RepackedLayout::kLevels). A Q2_K super-block
// has d and dmin as Q4_K's, each sub-block its levels as Q3_K's two low bits and, per half, ggml's
// byte of scale (low nibble) and min (high nibble) for each row.
// Q4_K/Q5_K's packed scales (KScaleLayout) keep ggml's 12 bytes a row: a byte a scale or min in every
// sub-block, as the first layout had them, made each row 2.8% / 2.3% bigger than ggml's, and decode
// at one thread moves every byte from DRAM. Each tile decodes them once per super-block instead, 16
// rows at a time (a few ops per sub-block). Q3_K's bytes are 3.6% more than ggml's, Q6_K's and Q2_K's
// the same.
bool has_repacked(DType t);  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4
// The types of 256-value super-blocks (a head, then 8 sub-blocks, in a panel).
constexpr bool has_super_blocks(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_XS;
}
// Bytes of one 32-value (sub-)block of a panel (has_repacked(t)).
constexpr size_t repacked_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_K: return 4 * 64;                                  // levels (scales in the head)
    case DType::Q5_K: return 64 + 4 * 64;                             // fifth bits, levels
    case DType::Q6_K: return 2 * 64 + 4 * 64 + 2 * kPanelRows;        // top bits, low nibbles, two scales
    case DType::Q3_K: return 64 + 2 * 64 + 2 * kPanelRows;            // third bits, low bits, two scales
    case DType::Q2_K: return 2 * 64 + 2 * kPanelRows;                 // levels, two scale | min bytes
    case DType::IQ4_XS: return 4 * 64 + kPanelRows;                   // grid indices, int8 scales
    case DType::MXFP4: return 4 * 64 + kPanelRows;                    // grid indices, E8M0 bytes
    case DType::IQ4_NL:                                               // as Q4_0's: the same block
    case DType::Q4_0: return kPanelRows * sizeof(legacy::BlockQ4_0);  // ggml's bytes, rearranged
    case DType::Q4_1: return kPanelRows * sizeof(legacy::BlockQ4_1);
    case DType::Q5_0: return kPanelRows * sizeof(legacy::BlockQ5_0);
    case DType::Q5_1: return kPanelRows * sizeof(legacy::BlockQ5_1);
    default: return kPanelRows * sizeof(legacy::BlockQ8_0);
  }
}
// Q4_K/Q5_K's 6-bit scales and mins of a super-block's 16 rows, after their d and dmin in its head:
// decoded, they are four vectors O0..O3 of 64 bytes, O_k = sub-blocks 2k and 2k + 1 as byte 32 (j % 2)
// + r: row r's scale, + 16: its min (so sub-block j's 16 scales start at byte 32j, its mins 16 on).
// Stored: the low four bits of O0 | O2 << 4 (kLow), of O1 | O3 << 4 (kLow + 64), then the top two
// bits of O_k at bits 2k of byte i (kHigh). Decoding is a shift, an and and an or per vector.
struct KScaleLayout {
  static constexpr size_t kLow = 4 * kPanelRows;  // after the fp16 d and dmin
  static constexpr size_t kHigh = kLow + 2 * 64;
  static constexpr size_t kEnd = kHigh + 64;  // 12 bytes a row, as ggml's
  // A head with the scales decoded after d and dmin (a batch's copy of a panel).
  static constexpr size_t kDecodedEnd = kLow + 4 * 64;
  // Where value `min` (0: the scale) of sub-block j, row r sits among the decoded bytes.
  static constexpr int decoded(int j, int min, int r) { return 32 * j + 16 * min + r; }
};
// Per super-block (32 values for the legacy types, 256 for the K-quants): its (sub-)blocks and the
// head bytes before them.
constexpr int repacked_sub_blocks(DType t) { return has_super_blocks(t) ? 8 : 1; }
constexpr size_t repacked_head_bytes(DType t) {
  return t == DType::Q6_K || t == DType::Q3_K || t == DType::IQ4_XS ? 2 * kPanelRows  // d
         : t == DType::Q4_K || t == DType::Q5_K                     ? KScaleLayout::kEnd
         : has_super_blocks(t)                                      ? 4 * kPanelRows  // d, dmin
                                                                    : 0;
}
// Where a block without a Super (below) comes from: nothing to read before its blocks.
struct NoSuper {
  static NoSuper read(const uint8_t*) { return {}; }
};
// Where a reader's scale functions (iscale, scale, min, imin) find sub-block j's scales and mins:
// in the block pb itself (at their kScaleOffset), or where the reader's scales() says (Q4_K/Q5_K:
// their Super, which decoded a super-block's at once).
template <class Src, class Super>
inline const uint8_t* scale_src(const uint8_t* pb, const Super& sup, int j) {
  if constexpr (requires { Src::scales(pb, sup, j); })
    return Src::scales(pb, sup, j);
  else
    return pb;
}
// Where a repacked (sub-)block of type kType keeps its parts, for every ISA's reader: kSub blocks
// per super-block after kHead bytes of it (read once per super-block into a Super, which the
// K-quants' readers define), the level vectors from kLevels (a bit plane or Q6_K's first top-bit
// vector before them), then the scales from kScaleOffset.
template <DType kType>
struct RepackedLayout {
  static constexpr int kSub = repacked_sub_blocks(kType);
  static constexpr size_t kHead = repacked_head_bytes(kType);
  static constexpr bool kQ5 = kType == DType::Q5_0 || kType == DType::Q5_1 || kType == DType::Q5_K;
  // Where the level vectors start: after the bit plane (kQ5, Q3_K: at 0) or Q6_K's first top-bit
  // vector, which group 0 reads with them. The readers then first touch a block's cache lines in
  // address order. With the plane after the nibbles, one thread's decode from DRAM lost the stream:
  // 500m tg64 -t 1, plane last / first alternating, AVX-512 q5_k 85-92 / 95-101, q5_1 89-90 / 95-96;
  // AVX2 q5_1 65-68 / 93-95, q5_0 89-92 / 102-105, q5_k 91 / 97 (q6_k +2%, q3_k the same).
  static constexpr size_t kLevels = kQ5 || kType == DType::Q3_K || kType == DType::Q6_K ? 64 : 0;
  // Q6_K's top-bit vector k (groups 4k .. 4k + 3): before and after its four nibble vectors.
  static constexpr size_t top_bits(int k) { return k == 0 ? 0 : kLevels + 4 * 64; }
  // The scales after the level vectors (Q6_K: and its second top-bit vector; Q4_K/Q5_K: the block's
  // end, their scales are in the head).
  static constexpr size_t kScaleOffset = kLevels + (kType == DType::Q8_0                           ? 8 * 64
                                                    : kType == DType::Q6_K                         ? 5 * 64
                                                    : kType == DType::Q3_K || kType == DType::Q2_K ? 2 * 64
                                                                                                   : 4 * 64);
  static constexpr size_t kBlockBytes = repacked_block_bytes(kType);
  using Super = NoSuper;
};
// A panel packed per call (PanelFormat) has one block per super-block.
struct PackedLayout {
  static constexpr int kSub = 1;
  static constexpr size_t kHead = 0;
  using Super = NoSuper;
};

size_t repacked_panel_bytes(DType t, int64_t cols);  // one panel of 16 rows
// Bytes from one panel of a Panels matrix (or of a view of some of its columns) to the next, and
// the panel holding row r0.
inline size_t panel_stride(const WeightMatrix& w) {
  return w.panel_stride ? w.panel_stride : repacked_panel_bytes(w.type, w.cols);
}
inline const uint8_t* panel_at(const WeightMatrix& w, int64_t r0) { return w.data + r0 / kPanelRows * panel_stride(w); }
size_t repacked_bytes(const WeightMatrix& w);
// Panels [p0, p1) of w (in Rows layout) at their place in dst; panels are independent, so threads
// may repack disjoint ranges at once.
void repack(const WeightMatrix& w, uint8_t* dst, int64_t p0, int64_t p1);
// The GEMM over a repacked matrix at ISA level I (nullptr: none, so nothing may be repacked): AVX-512
// for every repacked type, AVX2 too, none at the scalar level.
template <Isa I>
GemmFn find_repacked(DType t);
template <>
GemmFn find_repacked<Isa::Scalar>(DType t);
template <>
GemmFn find_repacked<Isa::Avx2>(DType t);
template <>
GemmFn find_repacked<Isa::Avx512>(DType t);
// The same for a level chosen at run time; nullptr too where this CPU cannot run `isa`. The Avx2
// level's is find_avx_vnni's where that has one.
GemmFn find_repacked(Isa isa, DType t);
// The Avx2 level's GEMM over a repacked matrix whose one-token tiles run on AVX-VNNI (gemm_avx2.cpp);
// nullptr where cpu_features().avx_vnni is off (no AVX-VNNI, or WEFT_MAX_ISA=avx2) or t is not repacked.
GemmFn find_avx_vnni(DType t);

// ---- AMX (gemm_amx.cpp) ----
//
// A super-block type's panel for AMX's int8 tiles: per super-block each value's level times its
// int sub-block scale, w = sc (q - offset) (|w| <= 4064), split as w = 128 hi + lo with lo 0 .. 127,
// so that both are int8 and one super-block's 256 values sum in int32 in the tiles; the float step
// then runs once per super-block (its d_w x d_a), as the VNNI tiles' int32 super-blocks do. kHi:
// 8 sub-blocks x 8 groups of 64 bytes (the panel's group layout: lane r = 4 values of row r), the
// rows of AMX's B tiles; kLo the same for lo; kD the rows' d (16 f32); kMins (has_min types) each
// sub-block's -dmin x m (16 f32 each).
struct ScaledLayout {
  static constexpr size_t kHi = 0;
  static constexpr size_t kLo = 8 * kGroups * 64;
  static constexpr size_t kD = 2 * kLo;
  static constexpr size_t kMins = kD + 64;
  static constexpr size_t bytes(bool has_min) { return kMins + (has_min ? 8 * 64 : 0); }
};
// A repacked panel of n_super super-blocks into ScaledLayout, the Avx512 level's readers
// (gemm_avx512.cpp); nullptr for types without int sub-block scales (the legacy types, Q2_K).
using ScaledUnpackFn = void (*)(const uint8_t* src, int64_t n_super, uint8_t* out);
ScaledUnpackFn unpack_scaled_avx512(DType t);
// The legacy types', IQ4_NL's and MXFP4's AMX tiles read the format packed per call (PanelFormat),
// from the Avx512 level: pack_avx512 of rows (has_panel types), unpack_avx512 of a repacked panel of
// nb blocks (nullptr for the super-block types).
void pack_avx512(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t bb);
using UnpackFn = void (*)(const uint8_t* src, int64_t nb, const PanelFormat& f, uint8_t* out);
UnpackFn unpack_avx512(DType t);
// The GEMM on AMX tiles of w, for batches of activations quantized at level isa: Q3_K, Q4_K, Q5_K,
// Q6_K and IQ4_XS repacked at load (ScaledLayout), the legacy types in rows, and the legacy types,
// IQ4_NL and MXFP4 repacked (PanelFormat); nullptr for other types and layouts, for levels other
// than Avx512 (the tiles take its ActBlocks), and where this CPU has no usable AMX
// (cpu_features().amx).
GemmFn find_amx(Isa isa, const WeightMatrix& w);
// From how many tokens a batch of type t runs on AMX: each call converts its panels, which fewer
// tokens do not pay back. 500m pp, 1 thread, AMX / VNNI: q4_k_m 24 tokens 379-391 / 412-415, 32
// 441-449 / 415-420; q6_k 24 x1.06-1.13; q4_0 32 440-449 / 457-461, 48 483-515 / 480-484; q8_0 48
// 414-419 / 428-437, 64 456-470 / 450-461.
constexpr int64_t amx_min_tokens(DType t) { return has_super_blocks(t) ? 32 : 64; }

// ---- the driver every ISA's GEMM runs, written once ----

// Tokens per pass over a panel: their activation blocks (48 bytes per 32 values) stay in L2
// (128 tokens x 5632 columns ~ 1 MiB) while every panel of the thread's rows passes over them.
constexpr int64_t kTokenChunk = 128;
// The first pass over a panel repacked at load streams it from DRAM, and the hardware prefetcher
// falls behind the tiles' arithmetic. Where cpu_features().l2_prefetch is set (Intel, Zen 5) every first
// pass of fewer than cpu_features().l2_prefetch_tokens tokens asks that many bytes ahead into L2.
// Elsewhere, and for larger batches, Zen 4's rule: from 4 tokens into L1, 32 blocks (~9 KiB) ahead
// (BM_gemm_big, 1 thread, q4_0: 12 GB/s at 8 tokens and 6 at 16 without, 17 and 8.7 with; 8 blocks
// gained less), and nothing under 4 tokens, where that only cost (decode 26-34 vs 22-25 GB/s).
constexpr size_t kPrefetchBlocks = 32;
constexpr int64_t kPrefetchMinTokens = 4;

// How far past each block a tile's first pass asks for its panel (0: not at all), and into which
// cache.
struct Ahead {
  size_t bytes = 0;
  bool into_l1 = false;
};

// The bytes ahead.bytes past block, asked into L1 or L2.
inline void prefetch_ahead_of_tile(const uint8_t* block, Ahead ahead, size_t bytes) {
  const uint8_t* const p = block + ahead.bytes;
  if (ahead.into_l1)
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
  else
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 2);
}

// y[t * ldy + r] for rows r < n_rows of one packed panel and tokens t < T (T fixed per function);
// act points at token 0 of block 0, blocks act_stride (= total tokens) ActBlocks apart. With
// ahead.bytes > 0 the tile also prefetches the bytes that far past each block it reads. A pair tile (one
// token) reads two panels at once, the second panel_stride bytes after the first, and its n_rows
// count both (16 < n_rows <= 32); the others read one and ignore panel_stride.
using TileFn = void (*)(const uint8_t* panel, size_t panel_stride, size_t block_bytes, int64_t nb, const ActBlock* act,
                        int64_t act_stride, float* y, int64_t ldy, int n_rows, Ahead ahead);

// The calling thread's panel, grown once and reused by every later call (64-byte aligned).
uint8_t* panel_buffer(size_t n_bytes);

// G, an ISA's micro-kernel: kTokens (widest tile), tile<kScales, kMin, kCorr, T> (a TileFn for
// T = 1..kTokens) and either pack(w, r0, n_rows, panel, block_bytes) (pack_panel or a faster
// equal) with kRepacked false, or kRepacked true and kBlockBytes (panels read in place); and, where
// its batch tiles do not keep one token's sums, int_tile<kScales, kMin, kCorr, T>, which does.
template <class G>
constexpr bool kHasIntTiles = requires {
  G::template int_tile<1, false, true, 1>;
};
template <class G, bool kIntSums, int kScales, bool kMin, bool kCorr, int T>
constexpr TileFn tile_of() {
  if constexpr (kIntSums)
    return G::template int_tile<kScales, kMin, kCorr, T>;
  else
    return G::template tile<kScales, kMin, kCorr, T>;
}
template <class G, bool kIntSums, int kScales, bool kMin, bool kCorr, int... T>
constexpr std::array<TileFn, sizeof...(T)> tiles_of(std::integer_sequence<int, T...>) {
  return {tile_of<G, kIntSums, kScales, kMin, kCorr, T + 1>()...};
}
// tiles[T - 1] handles T tokens.
template <class G, int kScales, bool kMin, bool kCorr, bool kIntSums = false>
constexpr std::array<TileFn, G::kTokens> kTiles =
    tiles_of<G, kIntSums, kScales, kMin, kCorr>(std::make_integer_sequence<int, G::kTokens>());

template <class G, bool kIntSums>
const TileFn* tiles_of_format(const PanelFormat& f) {
  if (f.n_scales == 2)
    return f.has_min ? kTiles<G, 2, true, false, kIntSums>.data() : kTiles<G, 2, false, true, kIntSums>.data();
  return f.has_min ? kTiles<G, 1, true, false, kIntSums>.data() : kTiles<G, 1, false, true, kIntSums>.data();
}
// int_sums: the tiles of a batch-invariant matrix (WeightMatrix::batch_invariant, --exact).
template <class G>
const TileFn* tiles_for(const PanelFormat& f, bool int_sums = false) {
  if constexpr (kHasIntTiles<G>)
    if (int_sums) return tiles_of_format<G, true>(f);
  return tiles_of_format<G, false>(f);
}

// One token over two panels at once, each its own stream from DRAM: G's pair<kScales, kMin, kCorr>
// where it has one (the ISAs' panels repacked at load) and cpu_features().pair_panels, else
// nullptr. On a Xeon one stream per thread left the tiles' arithmetic in series with the stream's
// stalls: BM_matvec_big Q4_0, one thread, plain AVX2, one panel / two panels at a time, 3 rounds
// alternating: 13.3-14.2 / 14.3-16.3 G/s (two threads 26.6-28.3 / 28.6-30.7); three or four
// panels gained no more. On Zen 5 two streams halved it (30.0 / 16.4 G/s, one thread).
inline const bool kPairPanels = cpu_features().pair_panels;
template <class G>
TileFn pair_tile_for(const PanelFormat& f) {
  if (!kPairPanels) return nullptr;
  if constexpr (requires { G::template pair<1, false, true>; }) {
    if (f.n_scales == 2) return f.has_min ? G::template pair<2, true, false> : G::template pair<2, false, true>;
    return f.has_min ? G::template pair<1, true, false> : G::template pair<1, false, true>;
  } else {
    return nullptr;
  }
}

// UnpackFn (above): a repacked panel of nb blocks unpacked into the format packed per call
// (PanelFormat), an ISA's unpack_panel<Src>.

// Batches over a repacked matrix through Packed, an ISA's G of panels packed per call, each panel
// unpacked once per token chunk by kUnpack: its tiles then read a group with one load instead of
// unpacking it again every Packed::kTokens tokens.
template <class Packed, UnpackFn kUnpack>
struct UnpackedPanels : Packed {
  static void pack(const WeightMatrix& w, int64_t r0, int, uint8_t* panel, size_t) {
    kUnpack(panel_at(w, r0), w.cols / kQK, panel_format(w.type), panel);
  }
};
// A super-block type's repacked panel with each sub-block's level section (nibbles, high-bit vectors,
// bit planes: its first kScaleOffset bytes) unpacked to kGroups x 64 bytes, a byte per level, and
// the rest (heads, int scales, mins) kept as it is: a batch's tiles then read a group with one load
// and still sum each super-block in int32, which UnpackedPanels' float-scale format gives up.
// kShift moves a repacked reader's offsets past the wider level section.
template <class Src>
struct ByteLevelLayout {
  static constexpr size_t kTail = Src::kBlockBytes - Src::kScaleOffset;  // scales, mins
  static constexpr size_t kBlockBytes = kGroups * 64 + kTail;
  static constexpr size_t kShift = kGroups * 64 - Src::kScaleOffset;
  static constexpr size_t buffer_bytes(int64_t nb) { return nb / Src::kSub * (Src::kHead + Src::kSub * kBlockBytes); }
};
// A reader of ByteLevelLayout<Src> panels: Src's heads, int scales and mins, its in-block ones kShift
// bytes further on. An ISA's reader adds group (one load) and deletes raw_nibbles: its levels are bytes.
template <class Src>
struct ByteLevelReader : Src {
  static constexpr size_t kBlockBytes = ByteLevelLayout<Src>::kBlockBytes;
  static const uint8_t* scales(const uint8_t* pb, const typename Src::Super& sup, int j) {
    return scale_src<Src>(pb + ByteLevelLayout<Src>::kShift, sup, j);
  }
};
// Batches over a super-block type's matrix repacked at load (read through Repacked): each panel
// unpacked to ByteLevelLayout once per token chunk, heads and each block's tail copied and its levels
// written by kLevels(block, out) (an ISA's Repacked::group per group), then read by Src, the ISA's
// ByteLevelReader; the ISA adds its tiles.
template <class Repacked, class S, int kTokensPerTile, void (*kLevels)(const uint8_t*, uint8_t*)>
struct BytePanels {
  using Src = S;
  static constexpr int kTokens = kTokensPerTile;
  static constexpr bool kRepacked = false;
  static constexpr size_t kBlockBytes = Src::kBlockBytes;
  static constexpr size_t buffer_bytes(int64_t nb) { return ByteLevelLayout<Repacked>::buffer_bytes(nb); }
  static void pack(const WeightMatrix& w, int64_t r0, int, uint8_t* out, size_t) {
    const uint8_t* src = panel_at(w, r0);
    for (int64_t b = 0; b < w.cols / kQK; ++b, src += Repacked::kBlockBytes, out += kBlockBytes) {
      if (b % Repacked::kSub == 0) {
        std::memcpy(out, src, Repacked::kHead);
        src += Repacked::kHead;
        out += Repacked::kHead;
      }
      kLevels(src, out);
      std::memcpy(out + kGroups * 64, src + Repacked::kScaleOffset, ByteLevelLayout<Repacked>::kTail);
    }
  }
};
// Base of a repacked G that hands batches to Unpacked where kOn (gemm_driver looks for Unpacked).
template <class Unpacked, bool kOn>
struct BatchesUnpacked {};
template <class U>
struct BatchesUnpacked<U, true> {
  using Unpacked = U;
};

// A GemmFn: chunks of kTokenChunk tokens; per chunk each panel of rows [r0, r1) is packed once
// (or read where it was repacked at load) and every tile of the chunk's tokens passes over it.
template <class G>
void gemm_driver(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
                 int64_t ldy) {
  // A G whose tiles would unpack a repacked panel again on every pass hands batches to its
  // Unpacked G, which unpacks each panel once per chunk.
  if constexpr (requires { typename G::Unpacked; })
    if (n_tokens > G::kTokens && !w.batch_invariant)
      return gemm_driver<typename G::Unpacked>(w, r0, r1, act, n_tokens, y, ldy);
  WEFT_ASSERT(r0 % kPanelRows == 0 && r0 <= r1 && r1 <= w.rows);
  WEFT_ASSERT(!G::kRepacked || w.layout == WeightLayout::Panels);
  const PanelFormat f = panel_format(w.type);
  const TileFn* tiles = tiles_for<G>(f, w.batch_invariant);
  const TileFn pair = n_tokens == 1 ? pair_tile_for<G>(f) : nullptr;
  const int64_t nb = w.cols / kQK;
  size_t bb = f.block_bytes();
  uint8_t* buffer = nullptr;
  if constexpr (G::kRepacked) {
    bb = G::kBlockBytes;
  } else if constexpr (requires { G::buffer_bytes(nb); }) {  // a format of its own (heads, other blocks)
    bb = G::kBlockBytes;
    buffer = panel_buffer(G::buffer_bytes(nb));
  } else {
    buffer = panel_buffer(bb * nb);
  }
  const size_t panel_bytes = G::kRepacked ? panel_stride(w) : 0;
  const CpuFeatures& cpu = cpu_features();
  const Ahead first_pass_ahead = !G::kRepacked ? Ahead{}
                                 : cpu.l2_prefetch > 0 && n_tokens < cpu.l2_prefetch_tokens
                                     ? Ahead{cpu.l2_prefetch, false}
                                 : n_tokens >= kPrefetchMinTokens ? Ahead{kPrefetchBlocks * bb, true}
                                                                  : Ahead{};
  for (int64_t c0 = 0; c0 < n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = std::min(n_tokens, c0 + kTokenChunk);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
      if (pair && r1 - p > kPanelRows) {  // this panel and the next, read in place
        pair(w.data + p / kPanelRows * panel_bytes, panel_bytes, bb, nb, act, 1, y + p, ldy,
             static_cast<int>(std::min<int64_t>(2 * kPanelRows, r1 - p)), first_pass_ahead);
        p += kPanelRows;
        continue;
      }
      const int n_rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
      const uint8_t* panel = buffer;
      if constexpr (G::kRepacked)
        panel = w.data + p / kPanelRows * panel_bytes;
      else
        G::pack(w, p, n_rows, buffer, bb);
      for (int64_t t = c0; t < c1; t += G::kTokens) {
        const int64_t n_t = std::min<int64_t>(G::kTokens, c1 - t);
        // The first pass over a panel read in place streams it from DRAM: fetch ahead of it.
        const Ahead ahead = t == c0 ? first_pass_ahead : Ahead{};
        tiles[n_t - 1](panel, 0, bb, nb, act + t, n_tokens, y + t * ldy + p, ldy, n_rows, ahead);
      }
    }
  }
}

// The driver over Panels<t> for each repacked type t an ISA reads (kQ8: Q8_0 too; kQ2: Q2_K too;
// kIQ4: IQ4_NL, IQ4_XS and MXFP4 too).
template <template <DType> class Panels, bool kQ8, bool kQ2, bool kIQ4>
GemmFn repacked_driver(DType t) {
  switch (t) {
    case DType::Q4_0: return gemm_driver<Panels<DType::Q4_0>>;
    case DType::Q4_1: return gemm_driver<Panels<DType::Q4_1>>;
    case DType::Q5_0: return gemm_driver<Panels<DType::Q5_0>>;
    case DType::Q5_1: return gemm_driver<Panels<DType::Q5_1>>;
    case DType::Q4_K: return gemm_driver<Panels<DType::Q4_K>>;
    case DType::Q5_K: return gemm_driver<Panels<DType::Q5_K>>;
    case DType::Q6_K: return gemm_driver<Panels<DType::Q6_K>>;
    case DType::Q3_K: return gemm_driver<Panels<DType::Q3_K>>;
    case DType::Q2_K:
      if constexpr (kQ2) return gemm_driver<Panels<DType::Q2_K>>;
      return nullptr;
    case DType::Q8_0:
      if constexpr (kQ8) return gemm_driver<Panels<DType::Q8_0>>;
      return nullptr;
    case DType::IQ4_NL:
      if constexpr (kIQ4) return gemm_driver<Panels<DType::IQ4_NL>>;
      return nullptr;
    case DType::IQ4_XS:
      if constexpr (kIQ4) return gemm_driver<Panels<DType::IQ4_XS>>;
      return nullptr;
    case DType::MXFP4:
      if constexpr (kIQ4) return gemm_driver<Panels<DType::MXFP4>>;
      return nullptr;
    default: return nullptr;
  }
}

}  // namespace weft::kernels::gemm
