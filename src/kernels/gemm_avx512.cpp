// AVX-512 VNNI micro-kernel of the prompt GEMM (gemm_q8.h): 16 weight rows (one zmm lane each)
// x up to 8 tokens. Per 32-value block and token: 8 vpdpbusd (each 16 rows x 4 values, the
// token's 4 int8 values broadcast straight from memory), then one cvt + mul + fma; the weight
// group vectors are loaded once per block and shared by the 8 tokens. Never AMX.
#include "kernels/gemm_q8.h"

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/iquants_impl.h"
#include "kernels/kquants_impl.h"
#include "kernels/quants_legacy.h"

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
#include <cstring>
#include <type_traits>

#include "kernels/isa.h"
#include "kernels/simd_avx2.h"

namespace weft::kernels::gemm {
namespace {

WEFT_TARGET_AVX512 inline __m512i low_nibbles(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
WEFT_TARGET_AVX512 inline __m512i high_nibbles(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
}

// 16 fp16 scales at p as floats.
WEFT_TARGET_AVX512 inline __m512 fp16_vector(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Where a tile finds a block's group vectors (16 rows x 4 levels), scales and mins (its kSub, kHead
// and Super from gemm_q8.h's layouts): a panel packed for this call (PanelFormat) ...
struct PackedBlock : PackedLayout {
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return _mm512_loadu_si512(pb + 64 * g); }
  WEFT_TARGET_AVX512 static __m512 scale(const uint8_t* pb, int s, Super) {
    return _mm512_loadu_ps(pb + kGroups * 64 + 64 * s);
  }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t* pb, int n_scales, Super) {
    return _mm512_loadu_ps(pb + kGroups * 64 + 64 * n_scales);
  }
};

// q + 2^kBit where group g's bit of the bit-plane vector at p (gemm_q8.h: bit g of each byte) is set:
// one vptestmb (its load folded) and one masked add, as cheap as the 64-bit masks this layout
// replaced (shift + ternary logic ran 5-7% slower hot).
template <int kBit>
WEFT_TARGET_AVX512 inline __m512i or_plane_bits(__m512i q, const uint8_t* p, int g) {
  const __mmask64 bits = _mm512_test_epi8_mask(_mm512_loadu_si512(p), _mm512_set1_epi8(static_cast<char>(1 << g)));
  return _mm512_mask_add_epi8(q, bits, q, _mm512_set1_epi8(1 << kBit));
}

// The 4- and 5-bit levels of a repacked block of kType (gemm_q8.h): groups g and g + 4 are the low
// and high nibbles of one vector (loaded twice: the second load hits L1); 5-bit types or in each
// group's fifth bits from the bit plane before the four vectors.
template <DType kType>
WEFT_TARGET_AVX512 inline __m512i nibble_group(const uint8_t* pb, int g) {
  using L = RepackedLayout<kType>;
  const __m512i v = _mm512_loadu_si512(pb + L::kLevels + 64 * (g % 4));
  const __m512i q = g < 4 ? low_nibbles(v) : high_nibbles(v);
  if constexpr (!L::kQ5) return q;
  return or_plane_bits<4>(q, pb, g);
}

// Vector j of a repacked 4-bit block of kType as it is stored: group j's levels in its low nibbles,
// group j + 4's in its high ones (one token's tile takes the high ones as 16 x level).
template <DType kType>
WEFT_TARGET_AVX512 inline __m512i nibble_vector(const uint8_t* pb, int j) {
  static_assert(!RepackedLayout<kType>::kQ5);
  return _mm512_loadu_si512(pb + RepackedLayout<kType>::kLevels + 64 * j);
}

// ... or a legacy-type panel repacked at load: Q4_0/Q4_1/Q5_0/Q5_1 as nibble_group, Q8_0's vectors
// read as they are ...
template <DType kType>
struct LegacyPanelBlock : RepackedLayout<kType> {
  using L = RepackedLayout<kType>;
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) {
    if constexpr (kType == DType::Q8_0) return _mm512_loadu_si512(pb + 64 * g);
    return nibble_group<kType>(pb, g);
  }
  WEFT_TARGET_AVX512 static __m512i raw_nibbles(const uint8_t* pb, int j) requires(!L::kQ5 && kType != DType::Q8_0) {
    return nibble_vector<kType>(pb, j);
  }
  WEFT_TARGET_AVX512 static __m512 scale(const uint8_t* pb, int, NoSuper) { return fp16_vector(pb + L::kScaleOffset); }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t* pb, int, NoSuper) {
    return fp16_vector(pb + L::kScaleOffset + 32);
  }
};

// 16 bytes at p (one per row: scales, mins) as int32 lanes, unsigned or signed, or as floats.
WEFT_TARGET_AVX512 inline __m512i u8_lanes(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
WEFT_TARGET_AVX512 inline __m512i i8_lanes(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
WEFT_TARGET_AVX512 inline __m512 u8_vector(const uint8_t* p) { return _mm512_cvtepi32_ps(u8_lanes(p)); }

// A super-block's rows' d and -dmin (Q4_K, Q5_K, Q2_K).
struct DMinSuper {
  __m512 d, neg_dmin;
  WEFT_TARGET_AVX512 static DMinSuper read(const uint8_t* head) {
    return {fp16_vector(head), _mm512_sub_ps(_mm512_setzero_ps(), fp16_vector(head + 2 * kPanelRows))};
  }
};

// Q4_K / Q5_K's packed scales and mins of a super-block's head (KScaleLayout) decoded to its four
// vectors O_k: the low nibble (k < 2) or high nibble of the low-bit vector k % 2, or-ed with top
// bits 2k .. 2k + 1 moved to bits 4 .. 5 (16-bit shifts: the masks drop what crosses a byte).
WEFT_TARGET_AVX512 inline void decode_k_scales(const uint8_t* head, uint8_t* out) {
  using S = KScaleLayout;
  const __m512i n0 = _mm512_loadu_si512(head + S::kLow), n1 = _mm512_loadu_si512(head + S::kLow + 64);
  const __m512i h = _mm512_loadu_si512(head + S::kHigh);
  const __m512i top = _mm512_set1_epi8(0x30);
  const __m512i o[4] = {_mm512_ternarylogic_epi32(low_nibbles(n0), _mm512_slli_epi16(h, 4), top, 0xF8),  // a | (b & c)
                        _mm512_ternarylogic_epi32(low_nibbles(n1), _mm512_slli_epi16(h, 2), top, 0xF8),
                        _mm512_ternarylogic_epi32(high_nibbles(n0), h, top, 0xF8),
                        _mm512_ternarylogic_epi32(high_nibbles(n1), _mm512_srli_epi16(h, 2), top, 0xF8)};
  for (int k = 0; k < 4; ++k) _mm512_storeu_si512(out + 64 * k, o[k]);
}

// ... or a Q4_K / Q5_K panel repacked at load: per super-block the rows' d, dmin and packed scales
// and mins, then 8 sub-blocks of nibble_group levels. The Super decodes the scales and mins once per
// super-block; a sub-block's scale is d * sc and its min -dmin * m, the products the unpacked
// K-quant panels hold (exact in f32).
template <DType kType>
struct KPanelBlock : RepackedLayout<kType> {
  struct Super : DMinSuper {
    alignas(64) uint8_t scales[4 * 64];  // KScaleLayout's decoded bytes
    Super() = default;
    WEFT_TARGET_AVX512 explicit Super(const uint8_t* head) : DMinSuper(DMinSuper::read(head)) {
      decode_k_scales(head, scales);
    }
    WEFT_TARGET_AVX512 static Super read(const uint8_t* head) { return Super(head); }
  };
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return nibble_group<kType>(pb, g); }
  WEFT_TARGET_AVX512 static __m512i raw_nibbles(const uint8_t* pb, int j) requires(!RepackedLayout<kType>::kQ5) {
    return nibble_vector<kType>(pb, j);
  }
  static const uint8_t* scales(const uint8_t*, const Super& s, int j) {
    return s.scales + KScaleLayout::decoded(j, 0, 0);
  }
  WEFT_TARGET_AVX512 static __m512i iscale(const uint8_t* sb, int) { return u8_lanes(sb); }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t* sb, int, const Super& s) {
    return _mm512_mul_ps(s.neg_dmin, u8_vector(sb + KScaleLayout::decoded(0, 1, 0)));
  }
};

// Lanes lo and hi (int32 lanes whose values fit int16) as the int16 pair (lo, hi) of each dword.
WEFT_TARGET_AVX512 inline __m512i int16_pairs(__m512i lo, __m512i hi) {
  return _mm512_mask_blend_epi16(0xAAAAAAAA, lo, _mm512_slli_epi32(hi, 16));
}

constexpr size_t kL1DataBytes = 32 << 10;  // Zen 4's, Intel's since Skylake: 32-48 KiB

// A TileFn (gemm_q8.h) reading blocks through Src: the lanes of rows past n_rows are computed but
// not stored. A Src with integer sub-block scales (iscale: the repacked K-quants) keeps a
// super-block in int32: its activation scale is one (Q8_K's d), so each sub-block's int dot times
// its int scale adds up exactly (|sum| < 2^28 for every K-quant), and the float step (cvt, mul, fma)
// runs once per super-block instead of once per sub-block and scale, for a vpmulld and a vpaddd.
// Whether Src's batch tiles weigh sub-block sums by their int scales in float (tile's kFloatScales).
template <class Src>
constexpr bool float_scaled() {
  return requires(const uint8_t* p) { Src::iscale(p, 0); }
  &&!requires(const uint8_t* p) { Src::imin(p, 0); };
}

template <class Src, int kScales, bool kMin, bool kCorr, int T, int P = 1, bool kIntSums = false>
WEFT_TARGET_AVX512 void tile(const uint8_t* panel, size_t panel_stride, size_t block_bytes, int64_t nb,
                             const ActBlock* act, int64_t act_stride, float* y, int64_t ldy, int n_rows, Ahead ahead) {
  static_assert(P == 1 || T == 1);
  constexpr int kPerScale = kGroups / kScales;
  constexpr bool kInt = requires(const uint8_t* p) { Src::iscale(p, 0); };
  // Q2_K's mins per half in int32 too (imin: |sum| < 2^19), times -dmin once per super-block.
  constexpr bool kIntMin = requires(const uint8_t* p) { Src::imin(p, 0); };
  // Batches weigh each token's sub-block sums by their int scales in float: a cvt and an fma per
  // scale and token where vpmulld + vpaddd took three ops, two of them on the port vpdpbusd needs.
  // Each product is exact (|sum x scale| <= 2^24); their sum over a super-block rounds as any float
  // dot does. 500m pp128 -t 1, WEFT_MAX_ISA=avx512, 4 rounds alternating: q3_k x1.08, q6_k x1.05
  // (x1.18 with its byte panels, Avx512Panels), q4_k / q5_k / iq4_xs x1.02-1.04. One token keeps
  // int32: decode is not bound there. kIntSums (--exact's batch-invariant matrices) keeps int32 for
  // batches too: the float sums round once a super-block's passes 2^24, the int32 one's conversion
  // at the end only, so only it gives a batch's tokens their one-token bits.
  constexpr bool kFloatScales = kInt && !kIntMin && T > 1 && !kIntSums;
  // Q2_K batches: its sub-block sums fit int16 (16 x 3 x 128 < 2^15), so a block's two are one int16
  // pair per row, weighed by the rows' (sc0, sc1) in one vpdpwssd, and its mins (m0, m1) by the
  // token's (c0, c1) in another, where each scale and min took a vpmulld and a vpaddd. 500m q2_k
  // pp128, WEFT_MAX_ISA=avx512, 3 rounds alternating: x1.19 -t 1, x1.16 -t 2. One token's tile
  // measured x1.01: it keeps vpmulld.
  constexpr bool kPairSums = kIntMin && T > 1;
  // One token of a 4-bit type (one scale per block): each stored vector's high nibbles masked in
  // place (16 x level: vpdpbusd sums into int32, nothing saturates) into a sum of their own, shifted
  // down once per block, instead of a second load and a shift per group. 500m tg32 -t 1, 4 rounds
  // alternating: q4_0 x1.018, q4_k x1.013 (avx-vnni, its twin in vnni_tile: x1.034, x1.037).
  constexpr bool kHighNibbles = T == 1 && kScales == 1 && requires(const uint8_t* p) { Src::raw_nibbles(p, 0); };
  // One token's activation blocks are read once per panel, and a panel longer than L1 (Q6_K's
  // 5632-column rows: 74 KiB) evicts them in between: fetch the next ones ahead. 500m q6_k tg64 -t 1
  // x1.05-1.08 (8 and 6 rounds alternating); per matrix (timed in the runner), Q6_K ffn_down moved 0.85 of the
  // 2048-column matrices' GB/s without, 0.89-0.90 with; q4_k_m x1.02-1.07, -t 2 q6_k x1.12. The AVX2
  // tile, bound by its arithmetic there, measured no change.
  const bool act_ahead = T == 1 && static_cast<size_t>(nb) * block_bytes > kL1DataBytes;
  const uint8_t* pn[P];
  __m512 acc[P][T];
  for (int p = 0; p < P; ++p) {
    pn[p] = panel + p * panel_stride;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t b0 = 0; b0 < nb; b0 += Src::kSub) {
    typename Src::Super sup[P];
    for (int p = 0; p < P; ++p) {
      sup[p] = Src::Super::read(pn[p]);  // a super-block's head, then its blocks
      pn[p] += Src::kHead;
    }
    const ActBlock* const act0 = act;
    __m512i iacc[P][T];
    __m512i imin[P][T];
    __m512i first[T];  // kPairSums: the block's first half's sums
    __m512 facc[P][T];
    if constexpr (kInt)
      for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          iacc[p][t] = imin[p][t] = _mm512_setzero_si512();
          facc[p][t] = _mm512_setzero_ps();
        }
    for (int j = 0; j < Src::kSub; ++j, act += act_stride) {
      if (act_ahead) _mm_prefetch(reinterpret_cast<const char*>(act + 2 * act_stride), _MM_HINT_T0);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) {
        const uint8_t* const pb = pn[p];
        pn[p] += block_bytes;
        const uint8_t* const sb = scale_src<Src>(pb, sup[p], j);
        if (ahead.bytes) prefetch_ahead_of_tile(pb, ahead, block_bytes + Src::kHead);
#pragma GCC unroll 2
        for (int s = 0; s < kScales; ++s) {
          // Decode of two scales per block (Q6_K) leaves each token one short chain of dependent
          // vpdpbusd per scale and little else to overlap: two chains (even and odd groups), added
          // before the float step. 500m q6_k tg, 1 thread: x1.09 (median of 6 interleaved rounds);
          // Q4_0 (one chain of 8 per block) measured no gain.
          constexpr int kChains = T <= 2 && kPerScale <= 4 ? 2 : 1;
          __m512i sumi[kChains][T];
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            sumi[0][t] = kCorr ? _mm512_set1_epi32(s == 0 ? act[t].c0 : act[t].c1) : _mm512_setzero_si512();
            if constexpr (kChains == 2) sumi[1][t] = _mm512_setzero_si512();
          }
          if constexpr (kHighNibbles) {
            __m512i high = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
              const __m512i v = Src::raw_nibbles(pb, k);
              sumi[0][0] = _mm512_dpbusd_epi32(sumi[0][0], low_nibbles(v), _mm512_set1_epi32(load_i32(act->q + 4 * k)));
              high = _mm512_dpbusd_epi32(high, _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(0xF0))),
                                         _mm512_set1_epi32(load_i32(act->q + 4 * (k + 4))));
            }
            sumi[0][0] = _mm512_add_epi32(sumi[0][0], _mm512_srai_epi32(high, 4));
          } else {
#pragma GCC unroll 8
            for (int g = s * kPerScale; g < (s + 1) * kPerScale; ++g) {
              const __m512i w = Src::group(pb, g);
              __m512i(&chain)[T] = sumi[g % kChains];
#pragma GCC unroll 8
              for (int t = 0; t < T; ++t)
                chain[t] = _mm512_dpbusd_epi32(chain[t], w, _mm512_set1_epi32(load_i32(act[t].q + 4 * g)));
            }
          }
          if constexpr (kChains == 2)
            for (int t = 0; t < T; ++t) sumi[0][t] = _mm512_add_epi32(sumi[0][t], sumi[1][t]);
          if constexpr (kPairSums) {
            if (s == 0) {
#pragma GCC unroll 8
              for (int t = 0; t < T; ++t) first[t] = sumi[0][t];
            } else {
              const __m512i sc = int16_pairs(Src::iscale(sb, 0), Src::iscale(sb, 1));
#pragma GCC unroll 8
              for (int t = 0; t < T; ++t)
                iacc[p][t] = _mm512_dpwssd_epi32(iacc[p][t], int16_pairs(first[t], sumi[0][t]), sc);
            }
          } else if constexpr (kFloatScales) {
            const __m512 sc = _mm512_cvtepi32_ps(Src::iscale(sb, s));
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) facc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[0][t]), sc, facc[p][t]);
          } else if constexpr (kInt) {
            const __m512i sc = Src::iscale(sb, s);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) iacc[p][t] = _mm512_add_epi32(iacc[p][t], _mm512_mullo_epi32(sumi[0][t], sc));
          } else {
            const __m512 scale = Src::scale(sb, s, sup[p]);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t)
              acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[0][t]),
                                          _mm512_mul_ps(scale, _mm512_set1_ps(act[t].d)), acc[p][t]);
          }
        }
        if constexpr (kMin && kScales == 1) {
          const __m512 mn = Src::min(sb, kScales, sup[p]);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) acc[p][t] = _mm512_fmadd_ps(mn, _mm512_set1_ps(act[t].s), acc[p][t]);
        } else if constexpr (kMin && kPairSums) {
          const __m512i mn = int16_pairs(Src::imin(sb, 0), Src::imin(sb, 1));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t)
            imin[p][t] = _mm512_dpwssd_epi32(imin[p][t], mn, _mm512_set1_epi32(half_sums(act[t])));
        } else if constexpr (kMin && kIntMin) {  // a min per half (Q2_K), times the half's activation sum
#pragma GCC unroll 2
          for (int s = 0; s < kScales; ++s) {
            const __m512i m = Src::imin(sb, s);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t)
              imin[p][t] = _mm512_add_epi32(imin[p][t],
                                            _mm512_mullo_epi32(m, _mm512_set1_epi32(s == 0 ? act[t].c0 : act[t].c1)));
          }
        } else if constexpr (kMin) {
#pragma GCC unroll 2
          for (int s = 0; s < kScales; ++s) {
            const __m512 mn = Src::min(sb, s, sup[p]);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t)
              acc[p][t] = _mm512_fmadd_ps(
                  mn, _mm512_set1_ps(act[t].d * static_cast<float>(s == 0 ? act[t].c0 : act[t].c1)), acc[p][t]);
          }
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      if constexpr (kInt)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[p][t] = _mm512_fmadd_ps(kFloatScales ? facc[p][t] : _mm512_cvtepi32_ps(iacc[p][t]),
                                      _mm512_mul_ps(sup[p].d, _mm512_set1_ps(act0[t].d)), acc[p][t]);
      if constexpr (kIntMin)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
          acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin[p][t]),
                                      _mm512_mul_ps(sup[p].neg_dmin, _mm512_set1_ps(act0[t].d)), acc[p][t]);
    }
  }
  for (int p = 0; p < P; ++p) {  // the lanes of rows past n_rows are computed but not stored
    const auto row_mask = static_cast<__mmask16>((1u << std::min(kPanelRows, n_rows - p * kPanelRows)) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy + p * kPanelRows, row_mask, acc[p][t]);
  }
}

// ---- panel packing: the weights' packed bytes transposed so that lane r holds row r ----
//
// Unpacking is O(weights) per call against the kernel's O(weights x tokens), but done one value
// at a time (pack_panel) it cost as much as the kernel at 32 tokens; these SIMD versions move
// whole dwords: four or eight dwords of each of 16 rows become 4 / 8 vectors by an in-register
// transpose, and the nibble / bit unpacking then runs on 16 rows at once.

// Row pointers of a panel; rows past n_rows repeat the last one (their lanes are never stored).
struct PanelRows {
  const uint8_t* p[kPanelRows];
  PanelRows(const WeightMatrix& w, int64_t r0, int n_rows) {
    for (int r = 0; r < kPanelRows; ++r) p[r] = w.data + (r0 + std::min(r, n_rows - 1)) * w.row_stride;
  }
};

using avx2::load128;
using avx2::load256;

// out[g] lane r = dword g (g < 4) of the 16 bytes at rows.p[r] + off.
WEFT_TARGET_AVX512 inline void transpose_16x4(const PanelRows& rows, size_t off, __m512i out[4]) {
  __m512i in[4];  // in[k]: 128-bit lane i = row k + 4i
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    __m512i v = _mm512_castsi128_si512(load128(rows.p[k] + off));
    v = _mm512_inserti32x4(v, load128(rows.p[k + 4] + off), 1);
    v = _mm512_inserti32x4(v, load128(rows.p[k + 8] + off), 2);
    in[k] = _mm512_inserti32x4(v, load128(rows.p[k + 12] + off), 3);
  }
  // 4x4 dword transpose in every 128-bit lane: lane i of out[g] = dword g of rows 4i .. 4i + 3.
  const __m512i t0 = _mm512_unpacklo_epi32(in[0], in[1]), t1 = _mm512_unpackhi_epi32(in[0], in[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(in[2], in[3]), t3 = _mm512_unpackhi_epi32(in[2], in[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// out[g] lane r = dword g (g < 8) of the 32 bytes at rows.p[r] + off.
WEFT_TARGET_AVX512 inline void transpose_16x8(const PanelRows& rows, size_t off, __m512i out[8]) {
  __m512i in[8];  // in[k]: 256-bit half h = row k + 8h
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k)
    in[k] = _mm512_inserti64x4(_mm512_castsi256_si512(load256(rows.p[k] + off)), load256(rows.p[k + 8] + off), 1);
  __m512i t[8], u[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
  }
  // u[q] (q < 4: rows 0..3 of each half, q >= 4: rows 4..7): 128-bit lane 2h + e holds
  // dword (q % 4) + 4e of four rows of half h.
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {
    u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  // Dword g < 4: lanes 0 of u[g] and u[g + 4] per half; dword g + 4: lanes 1.
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    out[g] = _mm512_permutex2var_epi64(u[g], lo_idx, u[g + 4]);
    out[g + 4] = _mm512_permutex2var_epi64(u[g], hi_idx, u[g + 4]);
  }
}

// The fp16 at rows.p[r] + off of each row, as 16 floats.
WEFT_TARGET_AVX512 inline __m512 fp16_lanes(const PanelRows& rows, size_t off) {
  alignas(32) uint16_t h[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) std::memcpy(&h[r], rows.p[r] + off, 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

WEFT_TARGET_AVX512 inline void store_groups(uint8_t* pb, const __m512i q[kGroups]) {
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) _mm512_store_si512(pb + 64 * g, q[g]);
}

// The u32 at rows.p[r] + off of each row, as 16 lanes.
WEFT_TARGET_AVX512 inline __m512i u32_lanes(const PanelRows& rows, size_t off) {
  alignas(64) uint32_t v[kPanelRows];
  for (int r = 0; r < kPanelRows; ++r) std::memcpy(&v[r], rows.p[r] + off, 4);
  return _mm512_load_si512(v);
}

// Bits 0..3 of each dword to bit 4 of its bytes 0..3: the multiply puts bit k of copy k at bit 8k
// (copies at shifts 0, 7, 14, 21 never overlap, so nothing carries).
WEFT_TARGET_AVX512 inline __m512i spread_4_bits(__m512i v) {
  const __m512i t = _mm512_mullo_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0xF)), _mm512_set1_epi32(0x00204081));
  return _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(0x01010101)), 4);
}

// The legacy 4- and 5-bit types: Q4_0 / Q4_1, and Q5_0 / Q5_1 whose fifth bit of value v is bit v
// of qh; the _1 types add their min m after the scales.
template <class Block>
WEFT_TARGET_AVX512 void pack_q4_5_legacy(const PanelRows& rows, int64_t nb, size_t bb, uint8_t* panel) {
  constexpr bool kQ5 = std::is_same_v<Block, legacy::BlockQ5_0> || std::is_same_v<Block, legacy::BlockQ5_1>;
  constexpr bool kMin = std::is_same_v<Block, legacy::BlockQ4_1> || std::is_same_v<Block, legacy::BlockQ5_1>;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = panel + b * bb;
    const size_t off = b * sizeof(Block);
    __m512i qs[4], q[kGroups];
    transpose_16x4(rows, off + offsetof(Block, qs), qs);  // values 4g..4g+3 low nibbles, 4g+16.. high
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      q[g] = low_nibbles(qs[g]);
      q[g + 4] = high_nibbles(qs[g]);
    }
    if constexpr (kQ5) {
      const __m512i qh = u32_lanes(rows, off + offsetof(Block, qh));
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g)
        q[g] = _mm512_or_si512(q[g], spread_4_bits(_mm512_srl_epi32(qh, _mm_cvtsi32_si128(4 * g))));
    }
    store_groups(pb, q);
    _mm512_store_ps(pb + kGroups * 64, fp16_lanes(rows, off + offsetof(Block, d)));
    if constexpr (kMin) _mm512_store_ps(pb + kGroups * 64 + 64, fp16_lanes(rows, off + offsetof(Block, m)));
  }
}

WEFT_TARGET_AVX512 void pack_q8_0(const PanelRows& rows, int64_t nb, size_t bb, uint8_t* panel) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = panel + b * bb;
    const size_t off = b * sizeof(legacy::BlockQ8_0);
    __m512i q[kGroups];
    transpose_16x8(rows, off + 2, q);
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) q[g] = _mm512_xor_si512(q[g], bias);  // q + 128
    store_groups(pb, q);
    _mm512_store_ps(pb + kGroups * 64, fp16_lanes(rows, off));
  }
}

// Bit j of each byte moved to bit 4 (Q5_K's fifth bit of sub-block j). 16-bit shifts move bits
// across bytes, but bit 4 of either byte comes from its own byte for shifts up to 4 left, 3 right.
WEFT_TARGET_AVX512 inline __m512i fifth_bit(__m512i qh, int j) {
  const __m512i moved =
      j <= 4 ? _mm512_sll_epi16(qh, _mm_cvtsi32_si128(4 - j)) : _mm512_srl_epi16(qh, _mm_cvtsi32_si128(j - 4));
  return _mm512_and_si512(moved, _mm512_set1_epi8(0x10));
}

// Q4_K, and Q5_K whose fifth bit of value l of sub-block j is bit j of qh[l].
template <class Block>
WEFT_TARGET_AVX512 void pack_q4_5_K(const PanelRows& rows, int64_t nb, size_t bb, uint8_t* panel) {
  constexpr bool kQ5 = std::is_same_v<Block, kquants::BlockQ5K>;
  for (int64_t sb = 0; sb < nb / 8; ++sb) {
    const size_t off = sb * sizeof(Block);
    __m512i qh[kGroups];
    if constexpr (kQ5) transpose_16x8(rows, off + offsetof(Block, qh), qh);
    for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c (low nibbles), 2c + 1 (high)
      __m512i qs[kGroups], q[kGroups];
      transpose_16x8(rows, off + offsetof(Block, qs) + 32 * c, qs);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        q[g] = low_nibbles(qs[g]);
        if constexpr (kQ5) q[g] = _mm512_or_si512(q[g], fifth_bit(qh[g], 2 * c));
      }
      store_groups(panel + (8 * sb + 2 * c) * bb, q);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        q[g] = high_nibbles(qs[g]);
        if constexpr (kQ5) q[g] = _mm512_or_si512(q[g], fifth_bit(qh[g], 2 * c + 1));
      }
      store_groups(panel + (8 * sb + 2 * c + 1) * bb, q);
    }
    for (int r = 0; r < kPanelRows; ++r) {
      const auto* blk = reinterpret_cast<const Block*>(rows.p[r] + off);
      uint8_t sc[8], m[8];
      kquants::unpack_scales_mins(blk->scales, sc, m);
      const float d = _cvtsh_ss(blk->d), dmin = _cvtsh_ss(blk->dmin);
      for (int j = 0; j < 8; ++j) {
        auto* f = reinterpret_cast<float*>(panel + (8 * sb + j) * bb + kGroups * 64);
        f[r] = d * sc[j];
        f[16 + r] = -dmin * m[j];
      }
    }
  }
}

WEFT_TARGET_AVX512 void pack_q6_K(const PanelRows& rows, int64_t nb, size_t bb, uint8_t* panel) {
  using kquants::BlockQ6K;
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  for (int64_t sb = 0; sb < nb / 8; ++sb) {
    const size_t off = sb * sizeof(BlockQ6K);
    for (int h = 0; h < 2; ++h) {  // half h: sub-blocks 4h + p, p = 0..3 (see BlockQ6K)
      __m512i a[kGroups], b[kGroups], qh[kGroups], q[kGroups];
      transpose_16x8(rows, off + offsetof(BlockQ6K, ql) + 64 * h, a);
      transpose_16x8(rows, off + offsetof(BlockQ6K, ql) + 64 * h + 32, b);
      transpose_16x8(rows, off + offsetof(BlockQ6K, qh) + 32 * h, qh);
      uint8_t* pb = panel + (8 * sb + 4 * h) * bb;
      // Top bits 2p of qh go to bits 4..5: shift left by 4 - 2p (right by 2 for p = 3).
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g)
        q[g] = _mm512_or_si512(low_nibbles(a[g]), _mm512_and_si512(_mm512_slli_epi16(qh[g], 4), bits45));
      store_groups(pb, q);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g)
        q[g] = _mm512_or_si512(low_nibbles(b[g]), _mm512_and_si512(_mm512_slli_epi16(qh[g], 2), bits45));
      store_groups(pb + bb, q);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) q[g] = _mm512_or_si512(high_nibbles(a[g]), _mm512_and_si512(qh[g], bits45));
      store_groups(pb + 2 * bb, q);
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g)
        q[g] = _mm512_or_si512(high_nibbles(b[g]), _mm512_and_si512(_mm512_srli_epi16(qh[g], 2), bits45));
      store_groups(pb + 3 * bb, q);
    }
    for (int r = 0; r < kPanelRows; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ6K*>(rows.p[r] + off);
      const float d = _cvtsh_ss(blk->d);
      for (int j = 0; j < 8; ++j) {  // sub-block j: scales 2j (values 0..15) and 2j + 1
        auto* f = reinterpret_cast<float*>(panel + (8 * sb + j) * bb + kGroups * 64);
        f[r] = d * blk->scales[2 * j];
        f[16 + r] = d * blk->scales[2 * j + 1];
      }
    }
  }
}

// SIMD packing for every panel type; pack_panel (scalar) stays the reference.
void pack(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t bb) {
  const int64_t nb = w.cols / kQK;
  switch (w.type) {
    case DType::Q4_0: return pack_q4_5_legacy<legacy::BlockQ4_0>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q4_1: return pack_q4_5_legacy<legacy::BlockQ4_1>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q5_0: return pack_q4_5_legacy<legacy::BlockQ5_0>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q5_1: return pack_q4_5_legacy<legacy::BlockQ5_1>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q8_0: return pack_q8_0(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q4_K: return pack_q4_5_K<kquants::BlockQ4K>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q5_K: return pack_q4_5_K<kquants::BlockQ5K>(PanelRows(w, r0, n_rows), nb, bb, panel);
    case DType::Q6_K: return pack_q6_K(PanelRows(w, r0, n_rows), nb, bb, panel);
    default: return pack_panel(w, r0, n_rows, panel);
  }
}

struct Avx512Gemm {
  static constexpr int kTokens = kTileTokens;
  static constexpr bool kRepacked = false;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<PackedBlock, kScales, kMin, kCorr, T>;
  static void pack(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t bb) {
    gemm::pack(w, r0, n_rows, panel, bb);
  }
};

// ... or a Q6_K panel repacked at load: per super-block the rows' d, then 8 sub-blocks of low
// nibbles (nibble_group) between two vectors of top bits (group g: bits 2 (g % 4) of vector g / 4,
// moved to bits 4..5 and or-ed in by one ternary-logic op) and the int8 scales of the two halves.
struct Q6KPanelBlock : RepackedLayout<DType::Q6_K> {
  struct Super {
    __m512 d;
    WEFT_TARGET_AVX512 WEFT_ALWAYS_INLINE static Super read(const uint8_t* head) { return {fp16_vector(head)}; }
  };
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) {
    const __m512i high = _mm512_loadu_si512(pb + top_bits(g / 4));
    // Top bits 2k .. 2k + 1 to 4 .. 5 by 16-bit shifts: the mask drops what crosses into a byte.
    const int k = g % 4;
    const __m512i moved = k < 2 ? _mm512_slli_epi16(high, 4 - 2 * k) : k == 2 ? high : _mm512_srli_epi16(high, 2);
    const __m512i low = nibble_group<DType::Q6_K>(pb, g);
    return _mm512_ternarylogic_epi32(low, moved, _mm512_set1_epi8(0x30), 0xF8);  // a | (b & c)
  }
  WEFT_TARGET_AVX512 static __m512i iscale(const uint8_t* pb, int s) {
    return i8_lanes(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t*, int, const Super&) { return _mm512_setzero_ps(); }
};

// Group g's two-bit levels of a Q3_K / Q2_K panel sub-block whose two-bit vectors start at v0: bits
// 2 (g % 4) of vector g / 4.
WEFT_TARGET_AVX512 inline __m512i two_bit_group(const uint8_t* v0, int g) {
  const __m512i v = _mm512_loadu_si512(v0 + 64 * (g / 4));
  return _mm512_and_si512(g % 4 ? _mm512_srli_epi16(v, 2 * (g % 4)) : v, _mm512_set1_epi8(3));
}

// ... or a Q3_K panel repacked at load: per super-block the rows' d, then 8 sub-blocks of the third
// bits as a bit plane (or-ed in as Q5's fifth bits), two-bit levels (group g: bits 2 (g % 4) of
// vector g / 4) and the int8 scales of the two halves.
struct Q3KPanelBlock : RepackedLayout<DType::Q3_K> {
  using Super = Q6KPanelBlock::Super;
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) {
    return or_plane_bits<2>(two_bit_group(pb + kLevels, g), pb, g);
  }
  WEFT_TARGET_AVX512 static __m512i iscale(const uint8_t* pb, int s) {
    return i8_lanes(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t*, int, const Super&) { return _mm512_setzero_ps(); }
};

// ... or a Q2_K panel repacked at load: per super-block the rows' d and dmin, then 8 sub-blocks of
// two-bit levels (as Q3_K's) and, per half, each row's scale (low nibble) and min (high nibble).
struct Q2KPanelBlock : RepackedLayout<DType::Q2_K> {
  using Super = DMinSuper;
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return two_bit_group(pb + kLevels, g); }
  // Half s's scale | min bytes as 16 int32 lanes.
  WEFT_TARGET_AVX512 static __m512i bytes(const uint8_t* pb, int s) {
    return u8_lanes(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX512 static __m512i iscale(const uint8_t* pb, int s) {
    return _mm512_and_si512(bytes(pb, s), _mm512_set1_epi32(0x0F));
  }
  WEFT_TARGET_AVX512 static __m512i imin(const uint8_t* pb, int s) { return _mm512_srli_epi32(bytes(pb, s), 4); }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t* pb, int s, const Super& sup) {
    return _mm512_mul_ps(sup.neg_dmin, _mm512_cvtepi32_ps(imin(pb, s)));
  }
};

// ... or an IQ4_NL / IQ4_XS / MXFP4 panel repacked at load: Q4_0's nibbles are grid indices, and one
// vpshufb per group makes them the grid's levels + grid_bias (128, MXFP4 12), the u8 that vpdpbusd
// takes (the bias off through c0).
template <DType kType>
WEFT_TARGET_AVX512 inline __m512i grid_group(const uint8_t* pb, int g) {
  const __m512i grid =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(iquants::kGridU8<kType>.data())));
  return _mm512_shuffle_epi8(grid, nibble_group<kType>(pb, g));
}
// 16 E8M0 bytes at p (MXFP4's scales) as 2^(e - 128): vscalefps makes 1 x 2^(e - 128) exactly,
// subnormals (e < 2) and 2^127 (e = 255) included.
WEFT_TARGET_AVX512 inline __m512 e8m0_vector(const uint8_t* p) {
  return _mm512_scalef_ps(_mm512_set1_ps(1.f), _mm512_sub_ps(u8_vector(p), _mm512_set1_ps(128.f)));
}
// IQ4_NL / MXFP4: per block the rows' fp16 / E8M0 scales.
template <DType kType>
struct Grid32PanelBlock : RepackedLayout<kType> {
  using L = RepackedLayout<kType>;
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return grid_group<kType>(pb, g); }
  WEFT_TARGET_AVX512 static __m512 scale(const uint8_t* pb, int, NoSuper) {
    if constexpr (kType == DType::MXFP4)
      return e8m0_vector(pb + L::kScaleOffset);
    else
      return fp16_vector(pb + L::kScaleOffset);
  }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t*, int, NoSuper) { return _mm512_setzero_ps(); }
};
// IQ4_XS: per super-block the rows' d, per sub-block its int8 scales (ls - 32).
struct IQ4XSPanelBlock : RepackedLayout<DType::IQ4_XS> {
  using Super = Q6KPanelBlock::Super;
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return grid_group<DType::IQ4_XS>(pb, g); }
  WEFT_TARGET_AVX512 static __m512i iscale(const uint8_t* pb, int) { return i8_lanes(pb + kScaleOffset); }
  WEFT_TARGET_AVX512 static __m512 min(const uint8_t*, int, const Super&) { return _mm512_setzero_ps(); }
};

// The reader of type kType's panels (a value of it: the readers are empty structs).
template <DType kType>
auto panel_reader() {
  if constexpr (kType == DType::Q6_K)
    return Q6KPanelBlock{};
  else if constexpr (kType == DType::Q3_K)
    return Q3KPanelBlock{};
  else if constexpr (kType == DType::Q2_K)
    return Q2KPanelBlock{};
  else if constexpr (kType == DType::IQ4_NL || kType == DType::MXFP4)
    return Grid32PanelBlock<kType>{};
  else if constexpr (kType == DType::IQ4_XS)
    return IQ4XSPanelBlock{};
  else if constexpr (kType == DType::Q4_K || kType == DType::Q5_K)
    return KPanelBlock<kType>{};
  else
    return LegacyPanelBlock<kType>{};
}

// A repacked panel unpacked through Src into the format packed per call (PanelFormat: a byte per
// level, float scales and mins): an UnpackFn (gemm_q8.h).
template <class Src>
WEFT_TARGET_AVX512 void unpack_panel(const uint8_t* src, int64_t nb, const PanelFormat& f, uint8_t* out) {
  constexpr bool kInt = requires(const uint8_t* p) { Src::iscale(p, 0); };
  typename Src::Super sup{};
  for (int64_t b = 0; b < nb; ++b, src += Src::kBlockBytes, out += f.block_bytes()) {
    if (b % Src::kSub == 0) {
      sup = Src::Super::read(src);
      src += Src::kHead;
    }
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) _mm512_storeu_si512(out + 64 * g, Src::group(src, g));
    const uint8_t* const sb = scale_src<Src>(src, sup, static_cast<int>(b % Src::kSub));
    auto* floats = reinterpret_cast<float*>(out + kGroups * 64);
    for (int s = 0; s < f.n_scales; ++s) {
      if constexpr (kInt)
        _mm512_storeu_ps(floats + 16 * s, _mm512_mul_ps(sup.d, _mm512_cvtepi32_ps(Src::iscale(sb, s))));
      else
        _mm512_storeu_ps(floats + 16 * s, Src::scale(sb, s, sup));
    }
    if (f.has_min) _mm512_storeu_ps(floats + 16 * f.n_scales, Src::min(sb, f.n_scales, sup));
  }
}

// ... or a super-block panel with its levels unpacked to bytes (ByteLevelLayout): a group is one
// load.
template <class Src>
struct BytePanelBlock : ByteLevelReader<Src> {
  WEFT_TARGET_AVX512 static __m512i group(const uint8_t* pb, int g) { return _mm512_loadu_si512(pb + 64 * g); }
  static __m512i raw_nibbles(const uint8_t*, int) = delete;
};

// A repacked block's levels, a byte each (BytePanels' kLevels).
template <class Repacked>
WEFT_TARGET_AVX512 void byte_levels(const uint8_t* src, uint8_t* out) {
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) _mm512_storeu_si512(out + 64 * g, Repacked::group(src, g));
}
template <DType kType, class Repacked = decltype(panel_reader<kType>())>
struct Avx512BytePanels : BytePanels<Repacked, BytePanelBlock<Repacked>, kTileTokens, byte_levels<Repacked>> {
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<BytePanelBlock<Repacked>, kScales, kMin, kCorr, T>;
};

// Matrices of type kType repacked at load, read in place. The types whose high bits are a bit plane
// (a plane test and a masked add per group) hand batches to a panel unpacked once per token chunk:
// Q5_0 / Q5_1 to UnpackedPanels (gemm_q8.h): 500m pp128, old / new alternating, -t 1 and -t 2: q5_0
// 405-409 / 424-425 and 792-808 / 832-840, q5_1 368-376 / 392-394 and 735-741 / 766-772. Q5_K / Q3_K
// to Avx512BytePanels, which keeps their int32 super-blocks (UnpackedPanels' float scales cost q3_k
// 769 -> 709-741, q5_k nothing): pp128 -t 1 q5_k 384-387 / 406-412, q3_k 377-383 / 420-426. Types
// whose levels take one or two ops lose there (q4_k 433-440 / 416-418, iq4_xs 475-485 / 449-450,
// q2_k -1%), as do the K-quants in the float format (q6_k 825 -> 720 at -t 2). Q6_K's levels take
// five (two loads, a shift, a mask, an or): once the tile's scales went to float, its byte panels
// gained pp128 x1.18 at -t 1 and x1.16 at -t 2 (4 rounds each; they had lost 1% with vpmulld).
template <DType kType>
using Avx512Unpacked = std::conditional_t<has_super_blocks(kType), Avx512BytePanels<kType>,
                                          UnpackedPanels<Avx512Gemm, unpack_panel<decltype(panel_reader<kType>())>>>;
template <DType kType>
struct Avx512Panels : BatchesUnpacked<Avx512Unpacked<kType>,
                                      RepackedLayout<kType>::kQ5 || kType == DType::Q3_K || kType == DType::Q6_K> {
  using Src = decltype(panel_reader<kType>());
  static constexpr int kTokens = kTileTokens;
  static constexpr bool kRepacked = true;
  static constexpr size_t kBlockBytes = Src::kBlockBytes;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<Src, kScales, kMin, kCorr, T>;
  template <int kScales, bool kMin, bool kCorr>
  static constexpr TileFn pair = gemm::tile<Src, kScales, kMin, kCorr, 1, 2>;
  // Batches with one token's sums (gemm_q8.h's int_sums): tile itself where it has no float scales.
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn int_tile = [] {
    if constexpr (float_scaled<Src>() && T > 1)
      return gemm::tile<Src, kScales, kMin, kCorr, T, 1, true>;
    else
      return gemm::tile<Src, kScales, kMin, kCorr, T>;
  }();
};

// A super-block panel into ScaledLayout (gemm_q8.h) through Src. Per group, two vpmaddubsw multiply
// the unsigned levels by the row's int scale, the even bytes' pattern (sc, 0) and the odd ones'
// (0, sc), into words (|q sc| <= 255 x 32 or 63 x 127: no saturation); the offset's kOffset sc goes
// off each; then hi = w >> 7 and lo = w & 127 of the two are merged back into byte order (the even
// word's low byte, the odd word's as the high byte). Converting words to bytes one by one
// (vpmovwb) cost ~30% of the AMX tiles' time.
template <class Src, int kScales, int kOffset, bool kMin>
WEFT_TARGET_AVX512 void unpack_scaled(const uint8_t* src, int64_t n_super, uint8_t* out) {
  using L = ScaledLayout;
  const __m512i byte_mask = _mm512_set1_epi16(0x00FF), low7 = _mm512_set1_epi16(0x007F);
  for (int64_t sb_i = 0; sb_i < n_super; ++sb_i, out += L::bytes(kMin)) {
    const auto sup = Src::Super::read(src);
    src += Src::kHead;
    _mm512_storeu_ps(out + L::kD, sup.d);
    for (int j = 0; j < 8; ++j, src += Src::kBlockBytes) {
      const uint8_t* const sb = scale_src<Src>(src, sup, j);
      __m512i even[kScales], odd[kScales], bias[kScales];
      for (int s = 0; s < kScales; ++s) {
        const __m512i sc = Src::iscale(sb, s);  // a row's scale in its dword lane
        even[s] = _mm512_mullo_epi32(_mm512_and_si512(sc, _mm512_set1_epi32(0xFF)), _mm512_set1_epi32(0x10001));
        odd[s] = _mm512_slli_epi32(even[s], 8);
        const __m512i word =
            _mm512_and_si512(_mm512_mullo_epi32(sc, _mm512_set1_epi32(kOffset)), _mm512_set1_epi32(0xFFFF));
        bias[s] = _mm512_or_si512(word, _mm512_slli_epi32(word, 16));  // kOffset sc in both words
      }
#pragma GCC unroll 8
      for (int g = 0; g < kGroups; ++g) {
        const __m512i q = Src::group(src, g);
        const int s = g / (kGroups / kScales);
        __m512i we = _mm512_maddubs_epi16(q, even[s]), wo = _mm512_maddubs_epi16(q, odd[s]);
        if constexpr (kOffset != 0) {
          we = _mm512_sub_epi16(we, bias[s]);
          wo = _mm512_sub_epi16(wo, bias[s]);
        }
        // (a & mask) | (b << 8): ternary logic 0xD8 on (b << 8, a, mask) = mask ? a : b << 8.
        const __m512i hi = _mm512_ternarylogic_epi32(_mm512_slli_epi16(_mm512_srai_epi16(wo, 7), 8),
                                                     _mm512_srai_epi16(we, 7), byte_mask, 0xD8);
        const __m512i lo = _mm512_ternarylogic_epi32(_mm512_slli_epi16(wo, 8), we, low7, 0xD8);
        const size_t at = 64 * static_cast<size_t>(kGroups * j + g);
        _mm512_storeu_si512(out + L::kHi + at, hi);
        _mm512_storeu_si512(out + L::kLo + at, _mm512_and_si512(lo, _mm512_set1_epi16(0x7F7F)));
      }
      if constexpr (kMin) _mm512_storeu_ps(out + L::kMins + 64 * j, Src::min(sb, 1, sup));
    }
  }
}

template <DType kType>
constexpr UnpackFn kUnpack = unpack_panel<decltype(panel_reader<kType>())>;

}  // namespace

void pack_avx512(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t bb) {
  pack(w, r0, n_rows, panel, bb);
}

UnpackFn unpack_avx512(DType t) {
  switch (t) {
    case DType::Q4_0: return kUnpack<DType::Q4_0>;
    case DType::Q4_1: return kUnpack<DType::Q4_1>;
    case DType::Q5_0: return kUnpack<DType::Q5_0>;
    case DType::Q5_1: return kUnpack<DType::Q5_1>;
    case DType::Q8_0: return kUnpack<DType::Q8_0>;
    case DType::IQ4_NL: return kUnpack<DType::IQ4_NL>;
    case DType::MXFP4: return kUnpack<DType::MXFP4>;
    default: return nullptr;  // the super-block types: unpack_scaled_avx512
  }
}

ScaledUnpackFn unpack_scaled_avx512(DType t) {
  switch (t) {
    case DType::Q3_K: return unpack_scaled<Q3KPanelBlock, 2, act_offset(DType::Q3_K), false>;
    case DType::Q4_K: return unpack_scaled<KPanelBlock<DType::Q4_K>, 1, 0, true>;
    case DType::Q5_K: return unpack_scaled<KPanelBlock<DType::Q5_K>, 1, 0, true>;
    case DType::Q6_K: return unpack_scaled<Q6KPanelBlock, 2, act_offset(DType::Q6_K), false>;
    case DType::IQ4_XS: return unpack_scaled<IQ4XSPanelBlock, 1, act_offset(DType::IQ4_XS), false>;
    default: return nullptr;
  }
}

template <>
GemmFn find<Isa::Avx512>(DType t) {
  return has_panel(t) ? gemm_driver<Avx512Gemm> : nullptr;
}

template <>
GemmFn find_repacked<Isa::Avx512>(DType t) {
  return repacked_driver<Avx512Panels, true, true, true>(t);
}

}  // namespace weft::kernels::gemm
