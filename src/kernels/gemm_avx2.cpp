// AVX2 micro-kernel of the prompt GEMM (gemm_q8.h), for CPUs without AVX-512 VNNI: the same
// panels, each 64-byte group as two ymm (rows 0..7, 8..15). vpmaddubsw multiplies the u8
// levels by the broadcast int8 values and adds pairs to int16; several groups' int16 sums are
// added before vpmaddwd widens them to int32, as many as the levels' bound keeps exact (group_run:
// 2 groups x 2 x 63 x 128 < 32768 for 6-bit levels, a whole block of 4-bit ones). Q8_0's levels (q + 128) would
// saturate vpmaddubsw: its tiles multiply |q| by the activations given q's sign instead (2 x 128 x 127 < 32767, one
// group at a time), and one token's by its values split in two (biased_block). Its decode reads panels too: ggml's rows
// through rows_dot moved 12 GB/s from DRAM (BM_matvec_big, one thread), the panels 27. The tile reads its blocks
// through a Src, as the AVX-512 one does: panels packed per call (the scalar pack_panel) or repacked at load, whose
// nibbles are unpacked in registers (decode then streams ggml's bytes, not one byte per level).
#include "kernels/gemm_q8.h"

#include "kernels/iquants_impl.h"
#include "kernels/isa.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

namespace weft::kernels::gemm {
namespace {

// A group's 16 lanes as two halves (rows 0..7, 8..15), levels or floats.
struct Halves {
  __m256i v[2];
};
struct HalvesF {
  __m256 v[2];
};

WEFT_TARGET_AVX2 inline Halves load_halves(const uint8_t* p) {
  return {{_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))}};
}

WEFT_TARGET_AVX2 inline void store_halves(uint8_t* p, const Halves& q) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), q.v[0]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32), q.v[1]);
}

WEFT_TARGET_AVX2 inline HalvesF fp16_halves(const uint8_t* p) {
  return {{_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
           _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))}};
}

// 16 bytes at p (unsigned, or signed) as two halves of int32 lanes, or of floats.
template <bool kSigned>
WEFT_TARGET_AVX2 inline Halves int_halves(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_srli_si128(b, 8);
  if constexpr (kSigned) return {{_mm256_cvtepi8_epi32(b), _mm256_cvtepi8_epi32(hi)}};
  return {{_mm256_cvtepu8_epi32(b), _mm256_cvtepu8_epi32(hi)}};
}
WEFT_TARGET_AVX2 inline HalvesF to_floats(const Halves& i) {
  return {{_mm256_cvtepi32_ps(i.v[0]), _mm256_cvtepi32_ps(i.v[1])}};
}
template <bool kSigned>
WEFT_TARGET_AVX2 inline HalvesF byte_halves(const uint8_t* p) {
  return to_floats(int_halves<kSigned>(p));
}

WEFT_TARGET_AVX2 inline HalvesF mul(const HalvesF& a, const HalvesF& b) {
  return {{_mm256_mul_ps(a.v[0], b.v[0]), _mm256_mul_ps(a.v[1], b.v[1])}};
}

// A panel packed for this call (PanelFormat): levels as bytes, float scales and mins.
struct PackedSrc : PackedLayout {
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return load_halves(pb + 64 * g); }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int s, Super) {
    const auto* sc = reinterpret_cast<const float*>(pb + kGroups * 64 + 64 * s);
    return {{_mm256_loadu_ps(sc), _mm256_loadu_ps(sc + 8)}};
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t* pb, int n_scales, Super s) { return scale(pb, n_scales, s); }
};

// q | group g's bits of the bit-plane vector at p (gemm_q8.h: bit g of each byte) at bit kBit, which
// q's levels leave clear (Q5's fifth bits, Q3_K's third). The 16-bit shifts move no bit across a
// byte: g and kBit are below 8.
template <int kBit>
WEFT_TARGET_AVX2 inline void or_plane_bits(Halves& q, const uint8_t* p, int g) {
  const Halves v = load_halves(p);
  for (int h = 0; h < 2; ++h) {
    const __m256i moved = g < kBit   ? _mm256_slli_epi16(v.v[h], kBit - g)
                          : g > kBit ? _mm256_srli_epi16(v.v[h], g - kBit)
                                     : v.v[h];
    q.v[h] = _mm256_or_si256(q.v[h], _mm256_and_si256(moved, _mm256_set1_epi8(1 << kBit)));
  }
}

// Levels of group g of a repacked 4- or 5-bit block of kType: the low (g < 4) or high nibbles of
// vector g % 4, plus the group's fifth bits (the bit plane before the four vectors) as 16.
// The largest level nibble_group gives for kType: 4 bits, or 5 with the fifth-bit plane.
template <DType kType>
constexpr int kNibbleMaxLevel = RepackedLayout<kType>::kQ5 ? 31 : 15;
template <DType kType>
WEFT_TARGET_AVX2 inline Halves nibble_group(const uint8_t* pb, int g) {
  using L = RepackedLayout<kType>;
  Halves q = load_halves(pb + L::kLevels + 64 * (g % 4));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (__m256i& v : q.v) v = _mm256_and_si256(g < 4 ? v : _mm256_srli_epi16(v, 4), low4);
  if constexpr (L::kQ5) or_plane_bits<4>(q, pb, g);
  return q;
}

// Vector j of a repacked 4-bit block of kType as it is stored: group j's levels in its low nibbles,
// group j + 4's in its high ones (AVX-VNNI's one-token tile takes the high ones as 16 x level).
template <DType kType>
WEFT_TARGET_AVX2 inline Halves nibble_vector(const uint8_t* pb, int j) {
  static_assert(!RepackedLayout<kType>::kQ5);
  return load_halves(pb + RepackedLayout<kType>::kLevels + 64 * j);
}

// The legacy 4- and 5-bit types repacked at load (gemm_q8.h).
template <DType kType>
struct LegacySrc : RepackedLayout<kType> {
  using L = RepackedLayout<kType>;
  static constexpr int kMaxLevel = kNibbleMaxLevel<kType>;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return nibble_group<kType>(pb, g); }
  WEFT_TARGET_AVX2 static Halves raw_nibbles(const uint8_t* pb, int j) requires(!L::kQ5) {
    return nibble_vector<kType>(pb, j);
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int, NoSuper) { return fp16_halves(pb + L::kScaleOffset); }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t* pb, int, NoSuper) {
    return fp16_halves(pb + L::kScaleOffset + 32);
  }
};

// Q8_0 repacked at load: eight vectors of levels + 128, then the rows' fp16 scales; read back as signed
// levels (signed_group) as its panels packed per call are.
struct Q8Src : RepackedLayout<DType::Q8_0> {
  static constexpr bool kSignedLevels = true;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return load_halves(pb + 64 * g); }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int, NoSuper) { return fp16_halves(pb + kScaleOffset); }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t*, int, NoSuper) {
    return {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
  }
};

// A super-block's rows' d and -dmin (Q4_K, Q5_K, Q2_K).
struct DMinSuper {
  HalvesF d, neg_dmin;
  WEFT_TARGET_AVX2 static DMinSuper read(const uint8_t* head) {
    HalvesF neg = fp16_halves(head + 2 * kPanelRows);
    for (__m256& v : neg.v) v = _mm256_sub_ps(_mm256_setzero_ps(), v);
    return {fp16_halves(head), neg};
  }
};

// Q4_K / Q5_K's packed scales and mins of a super-block's head (KScaleLayout) decoded to its four
// vectors O_k, 32 bytes at a time: the low nibble (k < 2) or high nibble of the low-bit vector k % 2,
// or-ed with top bits 2k .. 2k + 1 moved to bits 4 .. 5 (16-bit shifts: the masks drop what crosses
// a byte).
WEFT_TARGET_AVX2 inline void decode_k_scales(const uint8_t* head, uint8_t* out) {
  using S = KScaleLayout;
  const __m256i low4 = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  for (int half = 0; half < 64; half += 32) {
    const uint8_t* p = head + half;
    const __m256i n0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + S::kLow));
    const __m256i n1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + S::kLow + 64));
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + S::kHigh));
    const __m256i o[4] = {_mm256_slli_epi16(h, 4), _mm256_slli_epi16(h, 2), h, _mm256_srli_epi16(h, 2)};
    for (int k = 0; k < 4; ++k) {
      const __m256i n = k % 2 ? n1 : n0;
      const __m256i nibble = _mm256_and_si256(k < 2 ? n : _mm256_srli_epi16(n, 4), low4);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64 * k + half),
                          _mm256_or_si256(nibble, _mm256_and_si256(o[k], top)));
    }
  }
}

// vpshufb indices that make 16 bytes (broadcast to both lanes) int16 pairs: half h's dword i of lane
// l takes row 8h + 4l + i's byte twice, zero-extended (0x80: a zero byte).
alignas(32) constexpr std::array<std::array<uint8_t, 32>, 2> kPairIndexBytes = [] {
  std::array<std::array<uint8_t, 32>, 2> a{};
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 8; ++i) {
      const auto row = static_cast<uint8_t>(8 * h + i);
      const int at = 16 * (i / 4) + 4 * (i % 4);
      a[h][at] = a[h][at + 2] = row;
      a[h][at + 1] = a[h][at + 3] = 0x80;
    }
  return a;
}();

// Q4_K / Q5_K repacked at load: a super-block's d, dmin and packed scales and mins, decoded once per
// super-block by its Super, then sub-blocks of levels (scale d * sc, min -dmin * m, as the unpacked
// panels hold them). kDecoded: a batch's copy whose heads hold the scales decoded (Avx2KDecodedPanels).
template <DType kType, bool kDecoded = false>
struct KSrc : RepackedLayout<kType> {
  static constexpr int kMaxLevel = kNibbleMaxLevel<kType>;
  struct PackedSuper : DMinSuper {
    alignas(32) uint8_t scales[4 * 64];  // KScaleLayout's decoded bytes
    WEFT_TARGET_AVX2 static PackedSuper read(const uint8_t* head) {
      PackedSuper s;
      static_cast<DMinSuper&>(s) = DMinSuper::read(head);
      decode_k_scales(head, s.scales);
      return s;
    }
  };
  struct DecodedSuper : DMinSuper {
    const uint8_t* scales;
    WEFT_TARGET_AVX2 static DecodedSuper read(const uint8_t* head) {
      return {DMinSuper::read(head), head + KScaleLayout::kLow};
    }
  };
  using Super = std::conditional_t<kDecoded, DecodedSuper, PackedSuper>;
  static constexpr size_t kHead = kDecoded ? KScaleLayout::kDecodedEnd : KScaleLayout::kEnd;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return nibble_group<kType>(pb, g); }
  WEFT_TARGET_AVX2 static Halves raw_nibbles(const uint8_t* pb, int j) requires(!RepackedLayout<kType>::kQ5) {
    return nibble_vector<kType>(pb, j);
  }
  static const uint8_t* scales(const uint8_t*, const Super& s, int j) {
    return s.scales + KScaleLayout::decoded(j, 0, 0);
  }
  WEFT_TARGET_AVX2 static Halves iscale(const uint8_t* sb, int) { return int_halves<false>(sb); }
  // The 16 rows' scales as int16 pairs (sc, sc), one dword a row: one broadcast and two vpshufb.
  WEFT_TARGET_AVX2 static Halves scale_pairs(const uint8_t* sb) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb)));
    Halves p;
    for (int h = 0; h < 2; ++h)
      p.v[h] = _mm256_shuffle_epi8(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPairIndexBytes[h].data())));
    return p;
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* sb, int, const DMinSuper& s) {
    return mul(s.d, byte_halves<false>(sb));
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t* sb, int, const DMinSuper& s) {
    return mul(s.neg_dmin, byte_halves<false>(sb + KScaleLayout::decoded(0, 1, 0)));
  }
};

// Q6_K repacked at load: d, then sub-blocks of low nibbles between their top bits (group g: bits
// 2 (g % 4) of vector g / 4) and the int8 scales of the two halves.
struct Q6KSrc : RepackedLayout<DType::Q6_K> {
  struct Super {
    HalvesF d;
    WEFT_TARGET_AVX2 static Super read(const uint8_t* head) { return {fp16_halves(head)}; }
  };
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) {
    Halves q = nibble_group<DType::Q6_K>(pb, g);
    const Halves high = load_halves(pb + top_bits(g / 4));
    const int k = g % 4;  // top bits at 2k .. 2k + 1, wanted at 4 .. 5 (the mask drops what crosses bytes)
    for (int h = 0; h < 2; ++h) {
      const __m256i v = high.v[h];
      const __m256i moved = k == 0   ? _mm256_slli_epi16(v, 4)
                            : k == 1 ? _mm256_slli_epi16(v, 2)
                            : k == 2 ? v
                                     : _mm256_srli_epi16(v, 2);
      q.v[h] = _mm256_or_si256(q.v[h], _mm256_and_si256(moved, _mm256_set1_epi8(0x30)));
    }
    return q;
  }
  WEFT_TARGET_AVX2 static Halves iscale(const uint8_t* pb, int s) {
    return int_halves<true>(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int s, const Super& sup) {
    return mul(sup.d, byte_halves<true>(pb + kScaleOffset + kPanelRows * s));
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t*, int, const Super&) {
    return {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
  }
};

// Group g's two-bit levels of a Q3_K / Q2_K panel sub-block whose two-bit vectors start at v0: bits
// 2 (g % 4) of vector g / 4.
WEFT_TARGET_AVX2 inline Halves two_bit_group(const uint8_t* v0, int g) {
  Halves q = load_halves(v0 + 64 * (g / 4));
  for (__m256i& v : q.v) v = _mm256_and_si256(_mm256_srli_epi16(v, 2 * (g % 4)), _mm256_set1_epi8(3));
  return q;
}

// Q3_K repacked at load: d, then sub-blocks of the third bits as a bit plane, two-bit levels (group
// g: bits 2 (g % 4) of vector g / 4) and the int8 scales of the two halves.
struct Q3KSrc : RepackedLayout<DType::Q3_K> {
  static constexpr int kMaxLevel = 7;
  using Super = Q6KSrc::Super;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) {
    Halves q = two_bit_group(pb + kLevels, g);
    or_plane_bits<2>(q, pb, g);
    return q;
  }
  WEFT_TARGET_AVX2 static Halves iscale(const uint8_t* pb, int s) {
    return int_halves<true>(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int s, const Super& sup) {
    return mul(sup.d, byte_halves<true>(pb + kScaleOffset + kPanelRows * s));
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t*, int, const Super&) {
    return {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
  }
};

// Q2_K repacked at load: d and dmin, then sub-blocks of two-bit levels (as Q3_K's) and, per half,
// each row's scale (low nibble) and min (high nibble).
struct Q2KSrc : RepackedLayout<DType::Q2_K> {
  static constexpr int kMaxLevel = 3;
  using Super = DMinSuper;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return two_bit_group(pb + kLevels, g); }
  // Half s's scale | min bytes as int32 lanes.
  WEFT_TARGET_AVX2 static Halves bytes(const uint8_t* pb, int s) {
    return int_halves<false>(pb + kScaleOffset + kPanelRows * s);
  }
  WEFT_TARGET_AVX2 static Halves iscale(const uint8_t* pb, int s) {
    Halves b = bytes(pb, s);
    for (__m256i& v : b.v) v = _mm256_and_si256(v, _mm256_set1_epi32(0x0F));
    return b;
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int s, const Super& sup) {
    return mul(sup.d, to_floats(iscale(pb, s)));
  }
  WEFT_TARGET_AVX2 static Halves imin(const uint8_t* pb, int s) {
    Halves b = bytes(pb, s);
    for (__m256i& v : b.v) v = _mm256_srli_epi32(v, 4);
    return b;
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t* pb, int s, const Super& sup) {
    return mul(sup.neg_dmin, to_floats(imin(pb, s)));
  }
};

// The IQ4 grid's magnitudes, the unsigned operand of vpmaddubsw.
constexpr std::array<uint8_t, 16> kGridAbs = [] {
  std::array<uint8_t, 16> a{};
  for (int i = 0; i < 16; ++i)
    a[i] = static_cast<uint8_t>(iquants::kGrid[i] < 0 ? -iquants::kGrid[i] : iquants::kGrid[i]);
  return a;
}();

// 16 E8M0 bytes at p (MXFP4's scales) as 2^(e - 128), iquants::e8m0_half's bits 8 lanes at a time:
// (e - 1) << 23, or for e < 2 the subnormal 0x00200000 << e.
WEFT_TARGET_AVX2 inline HalvesF e8m0_halves(const uint8_t* p) {
  const Halves e = int_halves<false>(p);
  HalvesF f;
  for (int h = 0; h < 2; ++h) {
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e.v[h], _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e.v[h]);
    const __m256i below_2 = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e.v[h]);
    f.v[h] = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, below_2));
  }
  return f;
}

// The 16 bytes of a table broadcast to both 128-bit lanes, for vpshufb.
WEFT_TARGET_AVX2 inline __m256i table_of(const void* bytes) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(bytes)));
}

// IQ4_NL / IQ4_XS / MXFP4 repacked at load (gemm_q8.h): Q4_0's nibbles are grid indices. One vpshufb
// makes them grid levels + grid_bias (group). IQ4's levels + 128 would saturate vpmaddubsw's pair
// sums: signed_group reads them as the signed levels and their magnitudes, two vpshufb of the same
// indices (signed_levels). MXFP4's levels + 12 (0 .. 24) are summed as any unsigned levels. IQ4_XS: a
// super-block's d, then per sub-block the rows' int8 scales; IQ4_NL / MXFP4: the rows' fp16 / E8M0
// scales.
template <DType kType>
struct IQ4Src : RepackedLayout<kType> {
  using L = RepackedLayout<kType>;
  static constexpr bool kSignedLevels = kType != DType::MXFP4;
  static constexpr int kMaxLevel = kSignedLevels ? 127 : std::ranges::max(iquants::kGridU8<kType>);  // |q|, q + bias
  using Super = std::conditional_t<kType == DType::IQ4_XS, Q6KSrc::Super, NoSuper>;
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) {
    const __m256i grid = table_of(iquants::kGridU8<kType>.data());
    Halves q = nibble_group<kType>(pb, g);
    for (__m256i& v : q.v) v = _mm256_shuffle_epi8(grid, v);
    return q;
  }
  WEFT_TARGET_AVX2 static void signed_levels(const uint8_t* pb, int g, Halves& q,
                                             Halves& abs_q) requires(kSignedLevels) {
    const __m256i grid = table_of(iquants::kGrid), magnitude = table_of(kGridAbs.data());
    const Halves idx = nibble_group<kType>(pb, g);
    for (int h = 0; h < 2; ++h) {
      q.v[h] = _mm256_shuffle_epi8(grid, idx.v[h]);
      abs_q.v[h] = _mm256_shuffle_epi8(magnitude, idx.v[h]);
    }
  }
  WEFT_TARGET_AVX2 static Halves iscale(const uint8_t* pb, int) requires(kType == DType::IQ4_XS) {
    return int_halves<true>(pb + L::kScaleOffset);
  }
  WEFT_TARGET_AVX2 static HalvesF scale(const uint8_t* pb, int, const Super& sup) {
    if constexpr (kType == DType::IQ4_XS)
      return mul(sup.d, byte_halves<true>(pb + L::kScaleOffset));
    else if constexpr (kType == DType::MXFP4)
      return e8m0_halves(pb + L::kScaleOffset);
    else
      return fp16_halves(pb + L::kScaleOffset);
  }
  WEFT_TARGET_AVX2 static HalvesF min(const uint8_t*, int, const Super&) {
    return {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
  }
};

// Q8_0 packed per call: its levels q + 128 are read back as signed q (signed_group).
struct PackedQ8Src : PackedSrc {
  static constexpr bool kSignedLevels = true;
};
template <class Src>
constexpr bool kSignedLevels = requires {
  requires Src::kSignedLevels;
};

// sumi[t] += the dot of group g's signed levels (stored as q + 128, or from Src::signed_levels) with
// token t's four values per lane: vpmaddubsw takes |q| unsigned and the values with q's sign, so no
// pair saturates.
template <class Src, int T>
WEFT_TARGET_AVX2 inline void signed_group(const uint8_t* panel, int g, const ActBlock* act, __m256i (&sumi)[T][2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  Halves q, abs_q;
  if constexpr (requires(Halves & h) { Src::signed_levels(panel, g, h, h); }) {
    Src::signed_levels(panel, g, q, abs_q);
  } else {
    const Halves w = Src::group(panel, g);
    for (int h = 0; h < 2; ++h) {
      q.v[h] = _mm256_xor_si256(w.v[h], _mm256_set1_epi8(static_cast<char>(0x80)));
      abs_q.v[h] = _mm256_abs_epi8(q.v[h]);  // -128 becomes 0x80: 128 as unsigned
    }
  }
  for (int t = 0; t < T; ++t) {
    const __m256i a = _mm256_set1_epi32(load_i32(act[t].q + 4 * g));
    for (int h = 0; h < 2; ++h)
      sumi[t][h] = _mm256_add_epi32(
          sumi[t][h], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q.v[h], _mm256_sign_epi8(a, q.v[h])), ones));
  }
}

// Levels stored as q + 128 (Q8_0's) and read back as signed by signed_group: one token's block needs
// six ops per group and half there (xor, abs, sign, vpmaddubsw, vpmaddwd, add), which decode from DRAM
// cannot hide: BM_matvec_big Q8_0 moved 22 GB/s of BM_read's 31 with 51 hot. For one token, the
// token's values a = 16 hi + lo (hi -8..7, lo 0..15) multiply the unsigned stored levels u instead:
// sum u a = 16 sum u hi + sum u lo, and the offset term (c0) takes the 128 off. vpmaddubsw pairs stay
// below 2 x 255 x 8 (hi) and 2 x 255 x 15 (lo), so eight groups of hi and four of lo add up in int16:
// about four ops per group and half. BM_matvec_big Q8_0, one thread, old / new alternating: 21.6-22.4 /
// 25.2-31.5 GB/s; 500m q8_0 tg64 -t 1 x1.32 (-t 2 x1.03). IQ4's levels (a vpshufb of their nibbles)
// lost this way, tg64 -t 1 x0.83: the second vpmaddubsw adds to a type already bound by its arithmetic.
template <class Src>
constexpr bool kBiasedLevels = kSignedLevels<Src> && !requires(Halves & h) {
  Src::signed_levels(nullptr, 0, h, h);
};

template <class Src>
WEFT_TARGET_AVX2 inline void biased_block(const uint8_t* panel, const ActBlock& act, __m256i (&sumi)[1][2]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act.q));
  alignas(32) int8_t lo[kQK], hi[kQK];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo), _mm256_and_si256(a, low4));
  const __m256i high4 = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4);
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi), _mm256_sub_epi8(_mm256_xor_si256(high4, eight), eight));
  __m256i ph[2], pl[2][2];
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) {
    const Halves w = Src::group(panel, g);
    const __m256i ah = _mm256_set1_epi32(load_i32(hi + 4 * g)), al = _mm256_set1_epi32(load_i32(lo + 4 * g));
    for (int h = 0; h < 2; ++h) {
      const __m256i u_hi = _mm256_maddubs_epi16(w.v[h], ah), u_lo = _mm256_maddubs_epi16(w.v[h], al);
      ph[h] = g == 0 ? u_hi : _mm256_add_epi16(ph[h], u_hi);
      pl[g / 4][h] = g % 4 == 0 ? u_lo : _mm256_add_epi16(pl[g / 4][h], u_lo);
    }
  }
  const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi16(16);
  for (int h = 0; h < 2; ++h) {
    const __m256i lo_sum = _mm256_add_epi32(_mm256_madd_epi16(pl[0][h], ones), _mm256_madd_epi16(pl[1][h], ones));
    sumi[0][h] = _mm256_add_epi32(sumi[0][h], _mm256_add_epi32(_mm256_madd_epi16(ph[h], sixteen), lo_sum));
  }
}

// Groups whose vpmaddubsw sums add up in int16 before one vpmaddwd widens them: n groups of levels
// at most max_level against int8 values (|a| <= 128) stay exact while n x 2 x max_level x 128 < 2^15.
// Two for 6-bit levels; a whole block (8) for 4-bit ones, where pairs cost a vpmaddwd and a vpaddd
// more per two groups, half and token. One token's tile takes the longest run: 500m tg32 -t 1 avx2,
// pairs / runs, 6 rounds alternating: q4_k_m x1.010, q5_k_m x1.022, q5_0 x1.017 (hot Q5_0 / Q5_K
// +7-10%). Two tokens keep pairs: runs of 8 there lost pp128 x0.93 (q4_0), of 4 x0.97, the
// registers of two tokens' partial sums and accumulators running out. Q3_K / Q2_K batches
// (ScalePairLayout) sum a half's 4 groups: q3_k pp128 x1.03, q2_k the same.
constexpr int int16_run(int max_level) {
  int n = 8;
  while (n > 2 && n * 2 * max_level * 128 >= 32768) n /= 2;
  return n;
}
// The largest level of a reader's groups: its kMaxLevel, else 63 (6 bits, the widest unsigned levels).
template <class Src>
constexpr int kMaxLevel = [] {
  if constexpr (requires { Src::kMaxLevel; })
    return Src::kMaxLevel;
  else
    return 63;
}();
static_assert(int16_run(15) == 8 && int16_run(31) == 4 && int16_run(63) == 2 && int16_run(7) == 8);

// sum[t] += the dot of groups [g, g + N) of the block at panel (levels Src::group) with token t's
// values: their int16 sums added up, then widened to int32 by vpmaddwd with m (ones, or the rows'
// int16 scales: ScalePairLayout, KSrc::scale_pairs). N <= int16_run of the levels' bound.
template <class Src, int T, int N>
WEFT_TARGET_AVX2 inline void group_run(const uint8_t* panel, const ActBlock* act, int g, const Halves& m,
                                       __m256i (&sum)[T][2]) {
  __m256i p[T][2];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) {
    const Halves w = Src::group(panel, g + i);
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      const __m256i a = _mm256_set1_epi32(load_i32(act[t].q + 4 * (g + i)));
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i x = _mm256_maddubs_epi16(w.v[h], a);
        p[t][h] = i == 0 ? x : _mm256_add_epi16(p[t][h], x);
      }
    }
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) sum[t][h] = _mm256_add_epi32(sum[t][h], _mm256_madd_epi16(p[t][h], m.v[h]));
}

// Rows [0, n_rows) of each token's accumulators to y[t * ldy].
template <int T>
WEFT_TARGET_AVX2 inline void store_rows(const __m256 (&acc)[T][2], float* y, int64_t ldy, int n_rows) {
  for (int t = 0; t < T; ++t) {
    alignas(32) float out[kPanelRows];
    _mm256_store_ps(out, acc[t][0]);
    _mm256_store_ps(out + 8, acc[t][1]);
    std::memcpy(y + t * ldy, out, sizeof(float) * n_rows);
  }
}

// Lanes lo and hi (int32 lanes whose values fit int16) as the int16 pair (lo, hi) of each dword.
WEFT_TARGET_AVX2 inline Halves int16_pairs(const Halves& lo, const Halves& hi) {
  Halves p;
  for (int h = 0; h < 2; ++h) p.v[h] = _mm256_blend_epi16(lo.v[h], _mm256_slli_epi32(hi.v[h], 16), 0xAA);
  return p;
}

// Scale s's int32 sums of a block (sumi) weighed by the rows' scales: int scales into the super-block's
// int32 sums (iacc, iscale: the repacked K-quants, IQ4_XS), else float scales times the token's d
// into the float accumulators.
template <class Src, int T>
WEFT_TARGET_AVX2 inline void add_scaled(const uint8_t* sb, int s, const typename Src::Super& sup, const ActBlock* act,
                                        const __m256i (&sumi)[T][2], __m256i (&iacc)[T][2], __m256 (&acc)[T][2]) {
  if constexpr (requires(const uint8_t* p) { Src::iscale(p, 0); }) {
    const Halves sc = Src::iscale(sb, s);
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < 2; ++h) iacc[t][h] = _mm256_add_epi32(iacc[t][h], _mm256_mullo_epi32(sumi[t][h], sc.v[h]));
  } else {
    const HalvesF sc = Src::scale(sb, s, sup);
    for (int t = 0; t < T; ++t) {
      const __m256 d = _mm256_set1_ps(act[t].d);
      for (int h = 0; h < 2; ++h)
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t][h]), _mm256_mul_ps(sc.v[h], d), acc[t][h]);
    }
  }
}

// A block's min terms (kMin types): one float min per block times the token's s; Q2_K's int mins per
// half times the half's sum, in int32 (imin, |sum| < 2^19); else float mins per half.
template <class Src, int kScales, int T>
WEFT_TARGET_AVX2 inline void add_mins(const uint8_t* sb, const typename Src::Super& sup, const ActBlock* act,
                                      __m256 (&acc)[T][2], __m256i (&imin)[T][2]) {
  if constexpr (kScales == 1) {
    const HalvesF mn = Src::min(sb, kScales, sup);
    for (int t = 0; t < T; ++t) {
      const __m256 s = _mm256_set1_ps(act[t].s);
      for (int h = 0; h < 2; ++h) acc[t][h] = _mm256_fmadd_ps(mn.v[h], s, acc[t][h]);
    }
  } else if constexpr (requires(const uint8_t* p) { Src::imin(p, 0); }) {
    for (int s = 0; s < kScales; ++s) {
      const Halves m = Src::imin(sb, s);
      for (int t = 0; t < T; ++t) {
        const __m256i sum = _mm256_set1_epi32(s == 0 ? act[t].c0 : act[t].c1);
        for (int h = 0; h < 2; ++h) imin[t][h] = _mm256_add_epi32(imin[t][h], _mm256_mullo_epi32(m.v[h], sum));
      }
    }
  } else {
    for (int s = 0; s < kScales; ++s) {
      const HalvesF mn = Src::min(sb, s, sup);
      for (int t = 0; t < T; ++t) {
        const __m256 sum = _mm256_set1_ps(act[t].d * static_cast<float>(s == 0 ? act[t].c0 : act[t].c1));
        for (int h = 0; h < 2; ++h) acc[t][h] = _mm256_fmadd_ps(mn.v[h], sum, acc[t][h]);
      }
    }
  }
}

// A super-block's int32 sums (iacc; Q2_K's mins in imin) into the float accumulators, times its rows'
// d (and -dmin) and the activation scale of its first block (act0: Q8_K's, one per super-block).
template <class Src, int T>
WEFT_TARGET_AVX2 inline void close_super_block(const typename Src::Super& sup, const ActBlock* act0,
                                               const __m256i (&iacc)[T][2], const __m256i (&imin)[T][2],
                                               __m256 (&acc)[T][2]) {
  for (int t = 0; t < T; ++t) {
    const __m256 d = _mm256_set1_ps(act0[t].d);
    for (int h = 0; h < 2; ++h)
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[t][h]), _mm256_mul_ps(sup.d.v[h], d), acc[t][h]);
    if constexpr (requires(const uint8_t* p) { Src::imin(p, 0); })
      for (int h = 0; h < 2; ++h)
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[t][h]), _mm256_mul_ps(sup.neg_dmin.v[h], d), acc[t][h]);
  }
}

// A TileFn (gemm_q8.h) reading blocks through Src. A Src with integer sub-block scales (iscale: the
// repacked K-quants, IQ4_XS) keeps a super-block in int32, as the AVX-512 tile does: one activation
// scale (Q8_K's d) per super-block, so sub-block dots times int scales add up exactly (|sum| < 2^28),
// and the float step runs once per super-block for a vpmulld and a vpaddd per scale. P panels at once
// (one token's pair tile: P = 2), each with its own accumulators.
template <class Src, int kScales, bool kMin, bool kCorr, int T, int P = 1>
WEFT_TARGET_AVX2 void tile(const uint8_t* panel, size_t panel_stride, size_t block_bytes, int64_t nb,
                           const ActBlock* act, int64_t act_stride, float* y, int64_t ldy, int n_rows, Ahead ahead) {
  static_assert(P == 1 || T == 1);
  constexpr int kPerScale = kGroups / kScales;
  constexpr bool kSplit = T == 1 && kScales == 1 && kCorr && kBiasedLevels<Src>;  // biased_block
  constexpr bool kInt = requires(const uint8_t* p) { Src::iscale(p, 0); };
  // One token's scales as int16 pairs (scale_pairs) go into the vpmaddwd that widens two groups'
  // sums, for the vpmulld and vpaddd per half (one scale per block, no offset term: Q4_K, Q5_K). It
  // pays for the scales' decode per super-block: BM_matvec_hot Q4_K 35.3-36.1 -> 36.4-37.2 GB/s (37.5
  // before the decode). The 2-token tile lost with it (pp128 -t 1 x0.96).
  constexpr bool kPairs = T == 1 && kScales == 1 && !kCorr && requires(const uint8_t* p) { Src::scale_pairs(p); };
  constexpr int kRun = std::min({kPerScale, int16_run(kMaxLevel<Src>), T == 1 ? kGroups : 2});
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t* pn[P];
  __m256 acc[P][T][2];
  typename Src::Super sup[P]{};
  __m256i iacc[P][T][2], imin[P][T][2];
  for (int p = 0; p < P; ++p) {
    pn[p] = panel + p * panel_stride;
    for (int t = 0; t < T; ++t) {
      acc[p][t][0] = acc[p][t][1] = _mm256_setzero_ps();
      iacc[p][t][0] = iacc[p][t][1] = imin[p][t][0] = imin[p][t][1] = _mm256_setzero_si256();
    }
  }
  const ActBlock* act0 = act;
  for (int64_t b = 0; b < nb; ++b, act += act_stride) {
    const bool head = b % Src::kSub == 0;  // a super-block's head, then its blocks
    if (head) act0 = act;
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      if (head) {
        sup[p] = Src::Super::read(pn[p]);
        pn[p] += Src::kHead;
        if constexpr (kInt)
          for (int t = 0; t < T; ++t)
            iacc[p][t][0] = iacc[p][t][1] = imin[p][t][0] = imin[p][t][1] = _mm256_setzero_si256();
      }
      const uint8_t* const pb = pn[p];
      if (ahead.bytes) prefetch_ahead_of_tile(pb, ahead, block_bytes + Src::kHead);
      const uint8_t* const sb = scale_src<Src>(pb, sup[p], static_cast<int>(b % Src::kSub));
      for (int s = 0; s < kScales; ++s) {
        __m256i sumi[T][2];
        for (int t = 0; t < T; ++t) {  // signed levels need no offset correction; biased_block's do
          const __m256i c = kCorr && (!kSignedLevels<Src> || kSplit) ? _mm256_set1_epi32(s == 0 ? act[t].c0 : act[t].c1)
                                                                     : _mm256_setzero_si256();
          sumi[t][0] = sumi[t][1] = c;
        }
        if constexpr (kSplit) {
          biased_block<Src>(pb, act[0], sumi);
        } else if constexpr (kSignedLevels<Src>) {
          for (int g = s * kPerScale; g < (s + 1) * kPerScale; ++g) signed_group<Src, T>(pb, g, act, sumi);
        } else if constexpr (kPairs) {
          const Halves sc = Src::scale_pairs(sb);
#pragma GCC unroll 4
          for (int g = 0; g < kGroups; g += kRun) group_run<Src, T, kRun>(pb, act, g, sc, iacc[p]);
        } else {
#pragma GCC unroll 4
          for (int g = s * kPerScale; g < (s + 1) * kPerScale; g += kRun)
            group_run<Src, T, kRun>(pb, act, g, {{ones, ones}}, sumi);
        }
        if constexpr (!kPairs) add_scaled<Src, T>(sb, s, sup[p], act, sumi, iacc[p], acc[p]);
      }
      if constexpr (kMin) add_mins<Src, kScales, T>(sb, sup[p], act, acc[p], imin[p]);
      if constexpr (kInt)
        if (b % Src::kSub == Src::kSub - 1) close_super_block<Src, T>(sup[p], act0, iacc[p], imin[p], acc[p]);
      pn[p] += block_bytes;
    }
  }
  for (int p = 0; p < P; ++p)
    store_rows<T>(acc[p], y + p * kPanelRows, ldy, std::min(kPanelRows, n_rows - p * kPanelRows));
}

// A TileFn on AVX-VNNI: vpdpbusd sums each group's four u8 x s8 products straight into int32,
// where vpmaddubsw + vpmaddwd + vpaddd need an int16 step (and a bound on the levels) and Q8_0's /
// IQ4's signed levels a sign trick: here every reader's levels are read unsigned (Q8_0 and IQ4 as
// level + 128) and the offsets go off through the activation block's c0 / c1, as on AVX-512.
// Scales, mins and super-blocks as in tile above. On a Xeon (WEFT_MAX_ISA=avxvnni against avx2):
// BM_matvec_hot Q8_0 x2.3, IQ4_NL x1.8, Q4_K x1.26, Q5_K / Q6_K x1.2, Q4_0 x1.15; 500m tg32 -t 1
// from DRAM, 4 rounds alternating: q8_0 x1.12, q4_0 x1.04, q4_k_m x1.03, q6_k x1.01, q5_k x1.00.
// Two tokens' tiles (batches, in place or unpacked) against the AVX2 ones, pp128 -t 1, 3 rounds:
// q8_0 x2.23, iq4_nl x1.91, q5_0 x1.55, q4_0 x1.47, q5_k x1.47, q6_k x1.46, q3_k x1.43, q4_k x1.35
// (-t 2: q8_0 x2.27, q4_k_m x1.44).
template <class Src, int kScales, bool kMin, bool kCorr, int T, int P = 1>
WEFT_TARGET_AVX_VNNI void vnni_tile(const uint8_t* panel, size_t panel_stride, size_t block_bytes, int64_t nb,
                                    const ActBlock* act, int64_t act_stride, float* y, int64_t ldy, int n_rows,
                                    Ahead ahead) {
  static_assert(P == 1 || T == 1);
  constexpr int kPerScale = kGroups / kScales;
  constexpr bool kInt = requires(const uint8_t* p) { Src::iscale(p, 0); };
  // One token of a 4-bit type (one scale per block): each stored vector's high nibbles masked in
  // place (16 x level, no saturation in vpdpbusd's int32) into a sum of their own, shifted down once
  // per block, instead of a second load and a shift per group and half.
  constexpr bool kHighNibbles = T == 1 && kScales == 1 && requires(const uint8_t* p) { Src::raw_nibbles(p, 0); };
  // Batches of two int scales per block whose sub-block sums fit int16 (Q2_K's byte panels: 16 x 3 x
  // 128 < 2^15): the halves' sums as one int16 pair per row, weighed by the rows' (sc0, sc1) in one
  // vpdpwssd, and the mins (m0, m1) by the token's (c0, c1) in another, for a vpmulld and a vpaddd
  // per scale and min. One token's tile lost with it on Q3_K (tg32 -t 1 x0.955).
  constexpr bool kPairSums = T > 1 && kScales == 2 && kInt && 16 * kMaxLevel<Src> * 128 < (1 << 15);
  constexpr bool kIntMin = requires(const uint8_t* p) { Src::imin(p, 0); };
  const uint8_t* pn[P];
  __m256 acc[P][T][2];
  __m256i iacc[P][T][2], imin[P][T][2], first[T][2];
  typename Src::Super sup[P]{};
  for (int p = 0; p < P; ++p) {
    pn[p] = panel + p * panel_stride;
    for (int t = 0; t < T; ++t) {
      acc[p][t][0] = acc[p][t][1] = _mm256_setzero_ps();
      iacc[p][t][0] = iacc[p][t][1] = imin[p][t][0] = imin[p][t][1] = _mm256_setzero_si256();
    }
  }
  const ActBlock* act0 = act;
  for (int64_t b = 0; b < nb; ++b, act += act_stride) {
    const bool head = b % Src::kSub == 0;
    if (head) act0 = act;
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) {
      if (head) {
        sup[p] = Src::Super::read(pn[p]);
        pn[p] += Src::kHead;
        if constexpr (kInt)
          for (int t = 0; t < T; ++t)
            iacc[p][t][0] = iacc[p][t][1] = imin[p][t][0] = imin[p][t][1] = _mm256_setzero_si256();
      }
      const uint8_t* const pb = pn[p];
      if (ahead.bytes) prefetch_ahead_of_tile(pb, ahead, block_bytes + Src::kHead);
      const uint8_t* const sb = scale_src<Src>(pb, sup[p], static_cast<int>(b % Src::kSub));
      for (int s = 0; s < kScales; ++s) {
        __m256i sumi[T][2];
        for (int t = 0; t < T; ++t)
          sumi[t][0] = sumi[t][1] = kCorr ? _mm256_set1_epi32(s == 0 ? act[t].c0 : act[t].c1) : _mm256_setzero_si256();
        if constexpr (kHighNibbles) {
          __m256i high[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            const Halves v = Src::raw_nibbles(pb, j);
            const __m256i a = _mm256_set1_epi32(load_i32(act->q + 4 * j));
            const __m256i ah = _mm256_set1_epi32(load_i32(act->q + 4 * (j + 4)));
            for (int h = 0; h < 2; ++h) {
              sumi[0][h] = _mm256_dpbusd_avx_epi32(sumi[0][h], _mm256_and_si256(v.v[h], _mm256_set1_epi8(0x0F)), a);
              high[h] = _mm256_dpbusd_avx_epi32(high[h], _mm256_and_si256(v.v[h], _mm256_set1_epi8(0xF0)), ah);
            }
          }
          for (int h = 0; h < 2; ++h) sumi[0][h] = _mm256_add_epi32(sumi[0][h], _mm256_srai_epi32(high[h], 4));
        } else {
#pragma GCC unroll 8
          for (int g = s * kPerScale; g < (s + 1) * kPerScale; ++g) {
            const Halves w = Src::group(pb, g);
            for (int t = 0; t < T; ++t) {
              const __m256i a = _mm256_set1_epi32(load_i32(act[t].q + 4 * g));
              for (int h = 0; h < 2; ++h) sumi[t][h] = _mm256_dpbusd_avx_epi32(sumi[t][h], w.v[h], a);
            }
          }
        }
        if constexpr (!kPairSums) {
          add_scaled<Src, T>(sb, s, sup[p], act, sumi, iacc[p], acc[p]);
        } else if (s == 0) {
          for (int t = 0; t < T; ++t) first[t][0] = sumi[t][0], first[t][1] = sumi[t][1];
        } else {
          const Halves sc = int16_pairs(Src::iscale(sb, 0), Src::iscale(sb, 1));
          for (int t = 0; t < T; ++t) {
            const Halves sums = int16_pairs({{first[t][0], first[t][1]}}, {{sumi[t][0], sumi[t][1]}});
            for (int h = 0; h < 2; ++h) iacc[p][t][h] = _mm256_dpwssd_avx_epi32(iacc[p][t][h], sums.v[h], sc.v[h]);
          }
        }
      }
      if constexpr (kPairSums && kIntMin) {
        const Halves mn = int16_pairs(Src::imin(sb, 0), Src::imin(sb, 1));
        for (int t = 0; t < T; ++t) {
          const __m256i cc = _mm256_set1_epi32(half_sums(act[t]));
          for (int h = 0; h < 2; ++h) imin[p][t][h] = _mm256_dpwssd_avx_epi32(imin[p][t][h], mn.v[h], cc);
        }
      } else if constexpr (kMin) {
        add_mins<Src, kScales, T>(sb, sup[p], act, acc[p], imin[p]);
      }
      if constexpr (kInt)
        if (b % Src::kSub == Src::kSub - 1) close_super_block<Src, T>(sup[p], act0, iacc[p], imin[p], acc[p]);
      pn[p] += block_bytes;
    }
  }
  for (int p = 0; p < P; ++p)
    store_rows<T>(acc[p], y + p * kPanelRows, ldy, std::min(kPanelRows, n_rows - p * kPanelRows));
}

// 16 ymm registers: 2 tokens x (2 int32 + 2 float accumulators) plus four weight vectors.
constexpr int kAvx2Tokens = 2;

template <class S>
struct Avx2Gemm {
  using Src = S;
  static constexpr int kTokens = kAvx2Tokens;
  static constexpr bool kRepacked = false;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<Src, kScales, kMin, kCorr, T>;
  static void pack(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel, size_t) {
    pack_panel(w, r0, n_rows, panel);
  }
};

// A repacked panel unpacked into a panel packed per call (PanelFormat: a byte per level, float
// scales and mins) through Src, so that a batch's tiles read it without unpacking it again.
template <class Src>
WEFT_TARGET_AVX2 void unpack_panel(const uint8_t* src, int64_t nb, const PanelFormat& f, uint8_t* out) {
  typename Src::Super sup{};
  for (int64_t b = 0; b < nb; ++b, src += Src::kBlockBytes, out += f.block_bytes()) {
    if (b % Src::kSub == 0) {
      sup = Src::Super::read(src);
      src += Src::kHead;
    }
    for (int g = 0; g < kGroups; ++g) store_halves(out + 64 * g, Src::group(src, g));
    const uint8_t* const sb = scale_src<Src>(src, sup, static_cast<int>(b % Src::kSub));
    auto* floats = reinterpret_cast<float*>(out + kGroups * 64);
    for (int s = 0; s < f.n_scales; ++s) {
      const HalvesF sc = Src::scale(sb, s, sup);
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(floats + 16 * s + 8 * h, sc.v[h]);
    }
    if (f.has_min) {
      const HalvesF mn = Src::min(sb, f.n_scales, sup);
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(floats + 16 * f.n_scales + 8 * h, mn.v[h]);
    }
  }
}

// Q6_K, Q3_K and Q2_K weigh every 16 values by an int scale: two per block, where the tile above
// pays a vpmulld and a vpaddd per scale, token and half (or UnpackedPanels' float step). Their batches
// unpack a panel once per token chunk into ScalePairLayout instead: the levels a byte each, then per
// block each half's scale as the int16 pair (sc, sc) in a row's dword, then the pair (k sc0, k sc1).
// vpmaddwd, which widens two groups' int16 sums to int32 anyway, then multiplies them by the scale
// where it multiplied by ones, and the offset term (k = -offset: the token's half sums times the
// scales; Q2_K: k = 1 and its mins) is one vpmaddwd of the token's two half sums per block. Exact: an
// int16 sum is at most 4 x 63 x 127, times |sc| <= 128, over a super-block's 256 values < 2^28.
template <class Src>
struct ScalePairLayout {
  static constexpr size_t kScaleOffset = kGroups * 64;          // (sc, sc) of half 0, then of half 1
  static constexpr size_t kPairOffset = kScaleOffset + 2 * 64;  // (k sc0, k sc1)
  static constexpr size_t kBlockBytes = kPairOffset + 64;
  static constexpr size_t buffer_bytes(int64_t nb) { return nb / Src::kSub * (Src::kHead + Src::kSub * kBlockBytes); }
};

// Levels a byte each, group g at 64 g (ScalePairLayout's).
struct ByteLevels {
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return load_halves(pb + 64 * g); }
};

// A TileFn over ScalePairLayout<Src> panels (kUnit: k above; kMins: the pair term is Q2_K's mins,
// times -dmin, else the offset's, times d).
template <class Src, int kUnit, bool kMins, int T>
WEFT_TARGET_AVX2 void scale_pair_tile(const uint8_t* panel, size_t, size_t, int64_t nb, const ActBlock* act,
                                      int64_t act_stride, float* y, int64_t ldy, int n_rows, Ahead) {
  using L = ScalePairLayout<Src>;
  __m256 acc[T][2];
  __m256i iacc[T][2], imin[T][2];
  for (int t = 0; t < T; ++t) {
    acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    iacc[t][0] = iacc[t][1] = imin[t][0] = imin[t][1] = _mm256_setzero_si256();
  }
  typename Src::Super sup{};
  const ActBlock* act0 = act;
  for (int64_t b = 0; b < nb; ++b, panel += L::kBlockBytes, act += act_stride) {
    if (b % Src::kSub == 0) {
      sup = Src::Super::read(panel);
      panel += Src::kHead;
      act0 = act;
      for (int t = 0; t < T; ++t) iacc[t][0] = iacc[t][1] = imin[t][0] = imin[t][1] = _mm256_setzero_si256();
    }
    constexpr int kRun = std::min(kGroups / 2, int16_run(kMaxLevel<Src>));  // within a half: its scale
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; g += kRun) {
      const Halves sc = load_halves(panel + L::kScaleOffset + 64 * (g / 4));
      group_run<ByteLevels, T, kRun>(panel, act, g, sc, iacc);
    }
    const Halves pair = load_halves(panel + L::kPairOffset);
    for (int t = 0; t < T; ++t) {
      const uint32_t sums = static_cast<uint16_t>(act[t].c0 / kUnit) | static_cast<uint32_t>(act[t].c1 / kUnit) << 16;
      const __m256i x = _mm256_set1_epi32(static_cast<int32_t>(sums));
      for (int h = 0; h < 2; ++h) {
        __m256i& into = kMins ? imin[t][h] : iacc[t][h];
        into = _mm256_add_epi32(into, _mm256_madd_epi16(x, pair.v[h]));
      }
    }
    if (b % Src::kSub == Src::kSub - 1)
      for (int t = 0; t < T; ++t) {
        const __m256 d = _mm256_set1_ps(act0[t].d);
        for (int h = 0; h < 2; ++h) {
          acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[t][h]), _mm256_mul_ps(sup.d.v[h], d), acc[t][h]);
          if constexpr (kMins)
            acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[t][h]), _mm256_mul_ps(sup.neg_dmin.v[h], d), acc[t][h]);
        }
      }
  }
  store_rows<T>(acc, y, ldy, n_rows);
}

// The reader of type kType's panels (a value of it: the readers are empty structs).
template <DType kType>
auto panel_reader() {
  if constexpr (kType == DType::Q6_K)
    return Q6KSrc{};
  else if constexpr (kType == DType::Q3_K)
    return Q3KSrc{};
  else if constexpr (kType == DType::Q2_K)
    return Q2KSrc{};
  else if constexpr (kType == DType::Q8_0)
    return Q8Src{};
  else if constexpr (kType == DType::IQ4_NL || kType == DType::IQ4_XS || kType == DType::MXFP4)
    return IQ4Src<kType>{};
  else if constexpr (kType == DType::Q4_K || kType == DType::Q5_K)
    return KSrc<kType>{};
  else
    return LegacySrc<kType>{};
}
template <DType kType>
using Avx2Src = decltype(panel_reader<kType>());

// Batches over a Q6_K / Q3_K / Q2_K repacked matrix: each panel unpacked to ScalePairLayout once per
// token chunk (its levels by the repacked reader's group, its scales and mins by iscale / imin).
template <DType kType>
struct Avx2ScalePairPanels {
  using Repacked = Avx2Src<kType>;
  using L = ScalePairLayout<Repacked>;
  static constexpr bool kMins = kType == DType::Q2_K;
  static constexpr int kUnit = kMins ? 1 : -act_offset(kType);
  static constexpr int kTokens = kAvx2Tokens;
  static constexpr bool kRepacked = false;
  static constexpr size_t kBlockBytes = L::kBlockBytes;
  static constexpr size_t buffer_bytes(int64_t nb) { return L::buffer_bytes(nb); }
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = scale_pair_tile<Repacked, kUnit, kMins, T>;
  WEFT_TARGET_AVX2 static void pack(const WeightMatrix& w, int64_t r0, int, uint8_t* out, size_t) {
    const uint8_t* src = panel_at(w, r0);
    const __m256i unit = _mm256_set1_epi32(kUnit);
    for (int64_t b = 0; b < w.cols / kQK; ++b, src += Repacked::kBlockBytes, out += kBlockBytes) {
      if (b % Repacked::kSub == 0) {
        std::memcpy(out, src, Repacked::kHead);
        src += Repacked::kHead;
        out += Repacked::kHead;
      }
      Halves part[4];  // the halves' scales, then their mins (Q2_K) or scales again
      for (int g = 0; g < kGroups; ++g) store_halves(out + 64 * g, Repacked::group(src, g));
      for (int s = 0; s < 2; ++s) {
        part[s] = Repacked::iscale(src, s);
        if constexpr (kMins)
          part[2 + s] = Repacked::imin(src, s);
        else
          for (int h = 0; h < 2; ++h) part[2 + s].v[h] = _mm256_mullo_epi32(part[s].v[h], unit);
        store_halves(out + L::kScaleOffset + 64 * s, int16_pairs(part[s], part[s]));
      }
      store_halves(out + L::kPairOffset, int16_pairs(part[2], part[3]));
    }
  }
};

// Batches over a Q4_K repacked matrix: each panel copied once per token chunk with its heads' scales
// and mins decoded (KScaleLayout::kDecodedEnd), which the 2-token tiles would decode again on every
// pass: pp128 -t 1 x0.94 without. (AVX-512's 8-token tiles lost with the copy, x0.97.)
template <DType kType>
struct Avx2KDecodedPanels {
  using Src = KSrc<kType, true>;
  using Repacked = RepackedLayout<kType>;
  static constexpr int kTokens = kAvx2Tokens;
  static constexpr bool kRepacked = false;
  static constexpr size_t kBlockBytes = Src::kBlockBytes;
  static constexpr size_t kLevelBytes = Repacked::kSub * Repacked::kBlockBytes;  // a super-block's
  static constexpr size_t buffer_bytes(int64_t nb) { return nb / Src::kSub * (Src::kHead + kLevelBytes); }
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<Src, kScales, kMin, kCorr, T>;
  WEFT_TARGET_AVX2 static void pack(const WeightMatrix& w, int64_t r0, int, uint8_t* out, size_t) {
    const uint8_t* src = panel_at(w, r0);
    for (int64_t b = 0; b < w.cols / kQK; b += Repacked::kSub) {
      std::memcpy(out, src, KScaleLayout::kLow);  // d, dmin
      decode_k_scales(src, out + KScaleLayout::kLow);
      std::memcpy(out + Src::kHead, src + Repacked::kHead, kLevelBytes);
      src += Repacked::kHead + kLevelBytes;
      out += Src::kHead + kLevelBytes;
    }
  }
};

// Where the levels' high bits (Q5: fifth, Q6_K: top two, Q3_K: third) take ops per group and half to
// put in place, a prompt tile would pay them again every two tokens, so those types hand batches to
// UnpackedPanels: pp128 -t 1 read in place / unpacked once, q5_k 175 / 210-217, q6_k 150 / 180,
// q3_k 147-149 / 183-184 (Q5_0 measured x1.34 unpacked once, with the fifth bits still as masks).
// The two-scale types then to ScalePairLayout instead (pp128 -t 1, UnpackedPanels / it, alternating:
// q6_k 178-179 / 204-207, q3_k 180-182 / 202-213, q2_k, read in place before, 181-186 / 201-205).
// Nibble-only types unpack faster in registers than they read back a byte per level (Q4_0 pp128
// x0.88 unpacked once).
template <DType kType>
constexpr bool kScalePairs = kType == DType::Q6_K || kType == DType::Q3_K || kType == DType::Q2_K;
template <DType kType>
using Avx2Unpacked =
    std::conditional_t<kScalePairs<kType>, Avx2ScalePairPanels<kType>,
                       std::conditional_t<kType == DType::Q4_K, Avx2KDecodedPanels<kType>,
                                          UnpackedPanels<Avx2Gemm<PackedSrc>, unpack_panel<Avx2Src<kType>>>>>;
template <DType kType>
constexpr bool kBatchesUnpacked = RepackedLayout<kType>::kQ5 || kScalePairs<kType> || kType == DType::Q4_K;
template <DType kType>
struct Avx2Panels : BatchesUnpacked<Avx2Unpacked<kType>, kBatchesUnpacked<kType>> {
  using Src = Avx2Src<kType>;
  static constexpr int kTokens = kAvx2Tokens;
  static constexpr bool kRepacked = true;
  static constexpr size_t kBlockBytes = Src::kBlockBytes;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<Src, kScales, kMin, kCorr, T>;
  // Not for a scale per 16 values (Q2_K, Q3_K, Q6_K): on the Xeon they lost or gained nothing
  // (BM_matvec_big Q3_K 10.4 -> 8.9 G/s, Q6_K 12.7 -> 12.6), likely as two panels' state outgrows
  // the 16 ymm registers (the code was not inspected for spills).
  template <int kScales, bool kMin, bool kCorr>
  static constexpr TileFn pair = kScales == 1 ? gemm::tile<Src, kScales, kMin, kCorr, 1, 2> : nullptr;
};

// A super-block panel with its levels unpacked to bytes (ByteLevelLayout): a group is one load.
template <class Src>
struct ByteLevelSrc : ByteLevelReader<Src> {
  WEFT_TARGET_AVX2 static Halves group(const uint8_t* pb, int g) { return load_halves(pb + 64 * g); }
  static Halves raw_nibbles(const uint8_t*, int) = delete;
};

// A repacked block's levels, a byte each (BytePanels' kLevels).
template <class Repacked>
WEFT_TARGET_AVX2 void byte_levels(const uint8_t* src, uint8_t* out) {
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) store_halves(out + 64 * g, Repacked::group(src, g));
}
template <DType kType>
struct Avx2BytePanels
    : BytePanels<Avx2Src<kType>, ByteLevelSrc<Avx2Src<kType>>, kAvx2Tokens, byte_levels<Avx2Src<kType>>> {
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = gemm::tile<ByteLevelSrc<Avx2Src<kType>>, kScales, kMin, kCorr, T>;
};

// A G's panels (its Src) read by AVX-VNNI tiles.
template <class G>
struct VnniTiles : G {
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = vnni_tile<typename G::Src, kScales, kMin, kCorr, T>;
};

// Avx2Panels on AVX-VNNI: every tile, one token's and a batch's, in place or on the panels a batch
// unpacks. ScalePairLayout's vpmaddwd scales need the int16 sums that vpdpbusd does not make: Q6_K
// and Q3_K unpack to the float format instead, Q2_K (whose mins per half the float format has no
// place for) to bytes with its int scales and mins (kPairSums): 500m q2_k pp128 against its AVX2
// scale-pair tiles, 3 rounds alternating, x1.20 -t 1, x1.22 -t 2 (x1.07 without kPairSums). Q3_K
// measured x1.00-1.04 there, and stays in the float format.
template <DType kType>
using Avx2VnniUnpacked = VnniTiles<std::conditional_t<
    kType == DType::Q2_K, Avx2BytePanels<kType>,
    std::conditional_t<kScalePairs<kType>, UnpackedPanels<Avx2Gemm<PackedSrc>, unpack_panel<Avx2Src<kType>>>,
                       Avx2Unpacked<kType>>>>;
template <DType kType>
struct Avx2VnniPanels : BatchesUnpacked<Avx2VnniUnpacked<kType>, kBatchesUnpacked<kType>> {
  using Src = Avx2Src<kType>;
  static constexpr int kTokens = kAvx2Tokens;
  static constexpr bool kRepacked = true;
  static constexpr size_t kBlockBytes = Src::kBlockBytes;
  template <int kScales, bool kMin, bool kCorr, int T>
  static constexpr TileFn tile = vnni_tile<Src, kScales, kMin, kCorr, T>;
  template <int kScales, bool kMin, bool kCorr>
  static constexpr TileFn pair = vnni_tile<Src, kScales, kMin, kCorr, 1, 2>;
};

}  // namespace

GemmFn find_avx_vnni(DType t) {
  return cpu_features().avx_vnni && has_repacked(t) ? repacked_driver<Avx2VnniPanels, true, true, true>(t) : nullptr;
}

template <>
GemmFn find<Isa::Avx2>(DType t) {
  if (t == DType::Q8_0) return gemm_driver<Avx2Gemm<PackedQ8Src>>;
  return has_panel(t) ? gemm_driver<Avx2Gemm<PackedSrc>> : nullptr;
}

template <>
GemmFn find_repacked<Isa::Avx2>(DType t) {
  return repacked_driver<Avx2Panels, true, true, true>(t);
}

}  // namespace weft::kernels::gemm
