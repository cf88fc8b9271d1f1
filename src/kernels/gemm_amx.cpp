// The prompt GEMM (gemm_q8.h) on AMX tiles: 16 tokens x 16 weight rows per tile product, 64 values
// per TDPBSSD (a vpdpbusd does 16 x 4).
//
// What bounds it: a tile's result can only leave through memory (TILESTORED, ~16 cycles on the Xeon
// it was measured on), and the float step after it (per token a cvt, a mul by d_w d_a and an fma)
// did not overlap the tile unit. So the fewer float steps, the faster:
// - The super-block types (int sub-block scales): each panel is converted once per chunk of tokens
//   to w = sc (q - offset) split into two int8 parts (ScaledLayout, gemm_q8.h), so a super-block's
//   256 values sum exactly in two int32 tiles (|128 hi + lo| x 128 x 256 < 2^31) and the float step
//   runs once per super-block, as the VNNI tiles' int32 super-blocks do.
// Both sum the same ints as the VNNI tiles and take the same float steps in the same order: the
// outputs are the same floats with and without AMX (Gemm.AmxMatchesVecDot).
// - The legacy types (a float scale per 32 values): one TDPBSSD of 32 values, a store and a float
//   step per block, from the format packed per call with the levels made signed (no offset term).
#include "kernels/amx_tile_config.h"
#include "kernels/cpu_features.h"
#include "kernels/gemm_q8.h"

// GCC 12's _mm512_undefined_* (self-initialised on purpose) warn once inlined into target-attribute
// functions; the warnings are about the header, not this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#define WEFT_TARGET_AMX \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace weft::kernels::gemm {
namespace {

constexpr int kAmxTokens = 16;  // a tile's rows
constexpr int kSuperValues = 8 * kQK;
// Tokens per chunk: their int8 activations (256 bytes a token and super-block) stay in L2 while the
// thread's panels pass over them.
constexpr int64_t kAmxChunk = 128;

// kAmxTiles<K, kMin>[T - 1] = K::tile<kMin, T>, for T = 1 .. 16 tokens (gemm_q8.h's kTiles is the
// VNNI tiles' table, of another signature).
template <class K, bool kMin, int... T>
constexpr auto amx_tiles_of(std::integer_sequence<int, T...>) {
  return std::array{K::template tile<kMin, T + 1>...};
}
template <class K, bool kMin>
constexpr auto kAmxTiles = amx_tiles_of<K, kMin>(std::make_integer_sequence<int, kAmxTokens>());

// ---- the super-block types: a float step per super-block ----

// Tile 0: A, T tokens x 64 values; 2 / 3: B of hi / lo, 16 rows of 16 weight rows x 4 values;
// 4 / 5: C of hi / lo (T tokens x 16 int32) of even super-blocks, 6 / 7 of odd ones. Every tile a
// kernel names must be configured: an unconfigured one faults (SIGILL).
template <int T>
AmxTileConfig super_tile_config() {
  AmxTileConfig c;
  c.rows[0] = T;
  c.colsb[0] = 64;
  for (int i = 2; i < 4; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  for (int i = 4; i < 8; ++i) {
    c.rows[i] = T;
    c.colsb[i] = 64;
  }
  return c;
}

// One super-block's int sums of hi and lo into sums[0] / sums[1], through C tiles 4 / 5 (even) or
// 6 / 7 (odd). GCC's tile intrinsics paste the tile numbers into their asm: literals only.
template <int kOdd>
WEFT_TARGET_AMX inline void super_sums(const uint8_t* panel, const uint8_t* a, int32_t (*sums)[kAmxTokens][16]) {
  using L = ScaledLayout;
  if constexpr (kOdd) {
    _tile_zero(6);
    _tile_zero(7);
  } else {
    _tile_zero(4);
    _tile_zero(5);
  }
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    _tile_loadd(0, a + 64 * p, kSuperValues);
    _tile_loadd(2, panel + L::kHi + 1024 * p, 64);
    _tile_loadd(3, panel + L::kLo + 1024 * p, 64);
    if constexpr (kOdd) {
      _tile_dpbssd(6, 0, 2);
      _tile_dpbssd(7, 0, 3);
    } else {
      _tile_dpbssd(4, 0, 2);
      _tile_dpbssd(5, 0, 3);
    }
  }
  if constexpr (kOdd) {
    _tile_stored(6, sums[0], 64);
    _tile_stored(7, sums[1], 64);
  } else {
    _tile_stored(4, sums[0], 64);
    _tile_stored(5, sums[1], 64);
  }
}

// Tokens [t0, t1)'s activation values, super-block-major: super-block s of token t at
// out + 256 (s (t1 - t0) + t - t0), its 8 blocks' values in order.
void act_rows(const ActBlock* act, int64_t n_tokens, int64_t n_super, int64_t t0, int64_t t1, uint8_t* out) {
  for (int64_t s = 0; s < n_super; ++s)
    for (int64_t t = t0; t < t1; ++t)
      for (int j = 0; j < 8; ++j, out += kQK) std::memcpy(out, act[(8 * s + j) * n_tokens + t].q, kQK);
}

// y[t * ldy + r] for T <= 16 tokens over a ScaledLayout panel of n_super super-blocks; a: the tokens'
// values of super-block 0, a_stride bytes a super-block; act: their ActBlocks (d, s), act_stride
// apart. Per super-block: acc += each block's min x s_a, then (128 hi + lo) x (d_w d_a).
template <bool kMin, int T>
WEFT_TARGET_AMX void super_tile(const uint8_t* panel, int64_t n_super, const uint8_t* a, size_t a_stride,
                                const ActBlock* act, int64_t act_stride, float* y, int64_t ldy, int n_rows) {
  using L = ScaledLayout;
  static const AmxTileConfig config = super_tile_config<T>();
  _tile_loadconfig(&config);
  alignas(64) int32_t sums[2][2][kAmxTokens][16];  // [super-block % 2][hi, lo]
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  super_sums<0>(panel, a, sums[0]);
  for (int64_t s = 0; s < n_super; ++s, panel += L::bytes(kMin), a += a_stride, act += 8 * act_stride) {
    // The next super-block's tile work first, into the other C tiles: it runs beside this float step.
    if (s + 1 < n_super) {
      if (s % 2)
        super_sums<0>(panel + L::bytes(kMin), a + a_stride, sums[0]);
      else
        super_sums<1>(panel + L::bytes(kMin), a + a_stride, sums[1]);
    }
    const int32_t(&hi)[kAmxTokens][16] = sums[s % 2][0];
    const int32_t(&lo)[kAmxTokens][16] = sums[s % 2][1];
    // The mins first, then the super-block's sum: the VNNI tiles' order, so the same floats.
    if constexpr (kMin)
      for (int j = 0; j < 8; ++j) {
        const __m512 mn = _mm512_loadu_ps(panel + L::kMins + 64 * j);
        const ActBlock* const aj = act + j * act_stride;
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(mn, _mm512_set1_ps(aj[t].s), acc[t]);
      }
    const __m512 d = _mm512_loadu_ps(panel + L::kD);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(hi[t]), 7), _mm512_load_si512(lo[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(act[t].d)), acc[t]);
    }
  }
  _tile_release();
  const auto row_mask = static_cast<__mmask16>((1u << n_rows) - 1);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, row_mask, acc[t]);
}

struct SuperTiles {
  template <bool kMin, int T>
  static constexpr auto tile = super_tile<kMin, T>;
};

// A GemmFn over a repacked super-block matrix: per chunk of tokens their values into rows of 256,
// then per panel of rows [r0, r1) its ScaledLayout and every 16 tokens of the chunk over it.
void super_gemm(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
                int64_t ldy) {
  WEFT_ASSERT(r0 % kPanelRows == 0 && r0 <= r1 && r1 <= w.rows && w.layout == WeightLayout::Panels);
  const bool has_min = panel_format(w.type).has_min;
  const auto* tiles = has_min ? kAmxTiles<SuperTiles, true>.data() : kAmxTiles<SuperTiles, false>.data();
  const ScaledUnpackFn unpack = unpack_scaled_avx512(w.type);
  const int64_t n_super = w.cols / kSuperValues;
  const size_t panel_bytes = ScaledLayout::bytes(has_min) * n_super;
  uint8_t* const panel = panel_buffer(panel_bytes + kSuperValues * n_super * kAmxChunk);
  uint8_t* const a = panel + panel_bytes;
  for (int64_t c0 = 0; c0 < n_tokens; c0 += kAmxChunk) {
    const int64_t c1 = std::min(n_tokens, c0 + kAmxChunk);
    act_rows(act, n_tokens, n_super, c0, c1, a);
    const size_t a_stride = kSuperValues * static_cast<size_t>(c1 - c0);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
      const int n_rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
      unpack(panel_at(w, p), n_super, panel);
      for (int64_t t = c0; t < c1; t += kAmxTokens) {
        const int64_t n_t = std::min<int64_t>(kAmxTokens, c1 - t);
        tiles[n_t - 1](panel, n_super, a + kSuperValues * (t - c0), a_stride, act + t, n_tokens, y + t * ldy + p, ldy,
                       n_rows);
      }
    }
  }
}

// ---- the legacy types: a float step per 32-value block ----

// Tiles 0 / 1: A (T tokens x 32 values, in place in the ActBlocks) of even / odd blocks; 2 / 3:
// their B (8 rows of 16 weight rows x 4 levels: a PanelFormat block's groups as they are); 4 / 6:
// their C.
template <int T>
AmxTileConfig block_tile_config() {
  AmxTileConfig c;
  for (int i = 0; i < 2; ++i) {
    c.rows[i] = T;
    c.colsb[i] = kQK;
    c.rows[2 + i] = kGroups;
    c.colsb[2 + i] = 64;
    c.rows[4 + 2 * i] = T;
    c.colsb[4 + 2 * i] = 64;
  }
  return c;
}

template <int kOdd>
WEFT_TARGET_AMX inline void block_sums(const uint8_t* pb, const ActBlock* act, int32_t (*sums)[16]) {
  if constexpr (kOdd) {
    _tile_loadd(1, act->q, sizeof(ActBlock));
    _tile_loadd(3, pb, 64);
    _tile_zero(6);
    _tile_dpbssd(6, 1, 3);
    _tile_stored(6, sums, 64);
  } else {
    _tile_loadd(0, act->q, sizeof(ActBlock));
    _tile_loadd(2, pb, 64);
    _tile_zero(4);
    _tile_dpbssd(4, 0, 2);
    _tile_stored(4, sums, 64);
  }
}

// y[t * ldy + r] for T <= 16 tokens over a PanelFormat panel of one scale per block whose levels are
// signed (signed_levels); act: the tokens' ActBlocks of block 0, act_stride apart. As gemm_ref:
// acc += sum x (sc d_a) per block, + mn s_a. Block b + 1's tile work is issued before block b's
// float step, into the other tiles.
template <bool kMin, int T>
WEFT_TARGET_AMX void block_tile(const uint8_t* panel, size_t block_bytes, int64_t nb, const ActBlock* act,
                                int64_t act_stride, float* y, int64_t ldy, int n_rows) {
  static const AmxTileConfig config = block_tile_config<T>();
  _tile_loadconfig(&config);
  alignas(64) int32_t sums[2][kAmxTokens][16];
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  block_sums<0>(panel, act, sums[0]);
  for (int64_t b = 0; b < nb; ++b, panel += block_bytes, act += act_stride) {
    if (b + 1 < nb) {
      if (b % 2)
        block_sums<0>(panel + block_bytes, act + act_stride, sums[0]);
      else
        block_sums<1>(panel + block_bytes, act + act_stride, sums[1]);
    }
    const auto* sc = reinterpret_cast<const float*>(panel + kGroups * 64);
    const __m512 scale = _mm512_loadu_ps(sc);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[b % 2][t])),
                               _mm512_mul_ps(scale, _mm512_set1_ps(act[t].d)), acc[t]);
    if constexpr (kMin) {
      const __m512 mn = _mm512_loadu_ps(sc + 16);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(mn, _mm512_set1_ps(act[t].s), acc[t]);
    }
  }
  _tile_release();
  const auto row_mask = static_cast<__mmask16>((1u << n_rows) - 1);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, row_mask, acc[t]);
}

// A PanelFormat panel's levels less offset, in place: the int8 values TDPBSSD takes (|q - offset|
// <= 128; the has_min types' levels, 0 .. 31, are their own).
WEFT_TARGET_AMX void signed_levels(uint8_t* panel, size_t block_bytes, int64_t nb, int32_t offset) {
  const __m512i off = _mm512_set1_epi8(static_cast<char>(offset));
  for (int64_t b = 0; b < nb; ++b, panel += block_bytes)
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g)
      _mm512_storeu_si512(panel + 64 * g, _mm512_sub_epi8(_mm512_loadu_si512(panel + 64 * g), off));
}

struct BlockTiles {
  template <bool kMin, int T>
  static constexpr auto tile = block_tile<kMin, T>;
};

// A GemmFn over a legacy-type matrix, repacked at load or in rows: per chunk and panel of rows
// [r0, r1) the panel in PanelFormat with signed levels, then every 16 tokens of the chunk over it.
template <bool kRepackedAtLoad>
void blocks_gemm(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
                 int64_t ldy) {
  WEFT_ASSERT(r0 % kPanelRows == 0 && r0 <= r1 && r1 <= w.rows);
  const PanelFormat f = panel_format(w.type);
  WEFT_ASSERT(f.n_scales == 1);
  const auto* tiles = f.has_min ? kAmxTiles<BlockTiles, true>.data() : kAmxTiles<BlockTiles, false>.data();
  const int32_t offset = f.has_corr ? act_offset(w.type) : 0;
  const int64_t nb = w.cols / kQK;
  const size_t bb = f.block_bytes();
  const UnpackFn unpack = kRepackedAtLoad ? unpack_avx512(w.type) : nullptr;
  uint8_t* const panel = panel_buffer(bb * nb);
  for (int64_t c0 = 0; c0 < n_tokens; c0 += kAmxChunk) {
    const int64_t c1 = std::min(n_tokens, c0 + kAmxChunk);
    for (int64_t p = r0; p < r1; p += kPanelRows) {
      const int n_rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
      if constexpr (kRepackedAtLoad)
        unpack(panel_at(w, p), nb, f, panel);
      else
        pack_avx512(w, p, n_rows, panel, bb);
      if (offset) signed_levels(panel, bb, nb, offset);
      for (int64_t t = c0; t < c1; t += kAmxTokens) {
        const int64_t n_t = std::min<int64_t>(kAmxTokens, c1 - t);
        tiles[n_t - 1](panel, bb, nb, act + t, n_tokens, y + t * ldy + p, ldy, n_rows);
      }
    }
  }
}

}  // namespace

GemmFn find_amx(Isa isa, const WeightMatrix& w) {
  if (isa != Isa::Avx512 || !cpu_features().amx) return nullptr;
  if (w.layout == WeightLayout::Panels) {
    if (unpack_scaled_avx512(w.type)) return super_gemm;
    return unpack_avx512(w.type) ? blocks_gemm<true> : nullptr;
  }
  return has_panel(w.type) && !has_super_blocks(w.type) ? blocks_gemm<false> : nullptr;
}

}  // namespace weft::kernels::gemm
