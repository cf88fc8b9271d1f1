// The ISA-independent half of the prompt GEMM (gemm_q8.h): panel formats, weight unpacking,
// activation blocks, and the scalar reference micro-kernel.
#include "kernels/gemm_q8.h"

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/iquants_impl.h"
#include "kernels/isa.h"
#include "kernels/kquants_impl.h"
#include "kernels/quants_legacy.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace weft::kernels::gemm {
namespace {

using iquants::BlockIQ4XS;
using iquants::BlockMXFP4;
using kquants::BlockQ2K;
using kquants::BlockQ3K;
using kquants::BlockQ4K;
using kquants::BlockQ5K;
using kquants::BlockQ6K;
using kquants::BlockQ8K;
using legacy::BlockQ4_0;
using legacy::BlockQ4_1;
using legacy::BlockQ5_0;
using legacy::BlockQ5_1;
using legacy::BlockQ8_0;
using legacy::BlockQ8_1;

// One row's block b unpacked: 32 unsigned levels and its sc[n_scales], mn.
struct Unpacked {
  uint8_t q[kQK];
  float sc[2];
  float mn;
};

// Nibble j (low) and j + 16 (high) of the legacy 4-bit layouts.
inline void unpack_nibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + 16] = qs[j] >> 4;
  }
}

inline void add_fifth_bits(uint32_t qh, uint8_t* q) {
  for (int j = 0; j < kQK; ++j) q[j] |= static_cast<uint8_t>(((qh >> j) & 1u) << 4);
}

// Q4_K / Q5_K: sub-block j of super-block b / 8 sits in chunk j / 2 of qs, low nibbles for even
// j, high for odd; Q5_K's fifth bit of value l is bit j of qh[l].
template <class Block>
void unpack_q45_K(const Block* blocks, int64_t b, Unpacked& u) {
  const Block& blk = blocks[b / 8];
  const int j = static_cast<int>(b % 8), shift = 4 * (j & 1);
  const uint8_t* qs = blk.qs + 32 * (j / 2);
  for (int l = 0; l < kQK; ++l) u.q[l] = (qs[l] >> shift) & 0x0F;
  if constexpr (std::is_same_v<Block, BlockQ5K>)
    for (int l = 0; l < kQK; ++l) u.q[l] |= static_cast<uint8_t>(((blk.qh[l] >> j) & 1) << 4);
  uint8_t sc[8], m[8];
  kquants::unpack_scales_mins(blk.scales, sc, m);
  u.sc[0] = fp16_to_f32(blk.d) * sc[j];
  u.mn = -fp16_to_f32(blk.dmin) * m[j];
}

void unpack_block(DType t, const uint8_t* row, int64_t b, Unpacked& u) {
  switch (t) {
    case DType::Q4_0: {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
      unpack_nibbles(blk.qs, u.q);
      u.sc[0] = fp16_to_f32(blk.d);
      return;
    }
    case DType::Q5_0: {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
      unpack_nibbles(blk.qs, u.q);
      add_fifth_bits(load_u32(blk.qh), u.q);
      u.sc[0] = fp16_to_f32(blk.d);
      return;
    }
    case DType::Q8_0: {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
      for (int j = 0; j < kQK; ++j) u.q[j] = static_cast<uint8_t>(blk.qs[j] ^ 0x80);  // q + 128
      u.sc[0] = fp16_to_f32(blk.d);
      return;
    }
    case DType::Q4_1: {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
      unpack_nibbles(blk.qs, u.q);
      u.sc[0] = fp16_to_f32(blk.d);
      u.mn = fp16_to_f32(blk.m);
      return;
    }
    case DType::Q5_1: {
      const auto& blk = reinterpret_cast<const BlockQ5_1*>(row)[b];
      unpack_nibbles(blk.qs, u.q);
      add_fifth_bits(load_u32(blk.qh), u.q);
      u.sc[0] = fp16_to_f32(blk.d);
      u.mn = fp16_to_f32(blk.m);
      return;
    }
    case DType::Q4_K: return unpack_q45_K(reinterpret_cast<const BlockQ4K*>(row), b, u);
    case DType::Q5_K: return unpack_q45_K(reinterpret_cast<const BlockQ5K*>(row), b, u);
    case DType::Q6_K: {
      // Values 32p + l of half h (j = 4h + p); see BlockQ6K.
      const auto& blk = reinterpret_cast<const BlockQ6K*>(row)[b / 8];
      const int j = static_cast<int>(b % 8), h = j / 4, p = j % 4;
      const uint8_t* ql = blk.ql + 64 * h + 32 * (p & 1);
      const uint8_t* qh = blk.qh + 32 * h;
      const int shift = p < 2 ? 0 : 4;
      for (int l = 0; l < kQK; ++l)
        u.q[l] = static_cast<uint8_t>(((ql[l] >> shift) & 0x0F) | (((qh[l] >> (2 * p)) & 3) << 4));
      const float d = fp16_to_f32(blk.d);
      u.sc[0] = d * blk.scales[8 * h + 2 * p];
      u.sc[1] = d * blk.scales[8 * h + 2 * p + 1];
      return;
    }
    default: fail("gemm", "no panel format for type {}", dtype_name(t));
  }
}

inline int64_t sum_q(const int8_t* q, int n) {
  int64_t s = 0;
  for (int i = 0; i < n; ++i) s += q[i];
  return s;
}

}  // namespace

bool has_panel(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

PanelFormat panel_format(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:  // repacked only, as IQ4_XS and MXFP4
    case DType::IQ4_XS:
    case DType::MXFP4: return {1, false, true};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {1, true, false};
    case DType::Q3_K:  // repacked only (has_panel false): the tiles' format of their panels
    case DType::Q6_K: return {2, false, true};
    case DType::Q2_K: return {2, true, false};
    default: fail("gemm", "no panel format for type {}", dtype_name(t));
  }
}

void prepare_act_row(DType weight, const void* act_row, int64_t n, ActBlock* out, int64_t n_tokens) {
  WEFT_ASSERT(n % kQK == 0);
  const int64_t nb = n / kQK;
  switch (weight) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4: {
      // The weights' levels carry +8 / +16 / +128 / +12; their sum over a block times sum(a) cancels it.
      const int32_t offset = act_offset(weight);
      const auto* a = static_cast<const BlockQ8_0*>(act_row);
      for (int64_t b = 0; b < nb; ++b) {
        ActBlock& o = out[b * n_tokens];
        std::memcpy(o.q, a[b].qs, kQK);
        o.d = fp16_to_f32(a[b].d);
        o.s = 0;
        o.c0 = static_cast<int32_t>(-offset * sum_q(a[b].qs, kQK));
        o.c1 = 0;
      }
      return;
    }
    case DType::Q4_1:
    case DType::Q5_1: {
      const auto* a = static_cast<const BlockQ8_1*>(act_row);
      for (int64_t b = 0; b < nb; ++b) {
        ActBlock& o = out[b * n_tokens];
        std::memcpy(o.q, a[b].qs, kQK);
        o.d = fp16_to_f32(a[b].d);
        o.s = fp16_to_f32(a[b].s);  // as the Q8_1 block rounded it, so results match vec_dot
        o.c0 = o.c1 = 0;
      }
      return;
    }
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: {
      // The level offset of the symmetric types (Q6_K 32, Q3_K 4, IQ4_XS 128, the last over its one
      // scale per block) goes in through c0 / c1.
      const int32_t offset = act_offset(weight);
      const auto* a = static_cast<const BlockQ8K*>(act_row);
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ8K& sb = a[b / 8];
        const int j = static_cast<int>(b % 8);
        ActBlock& o = out[b * n_tokens];
        std::memcpy(o.q, sb.qs + kQK * j, kQK);
        o.d = sb.d;
        const int32_t s0 = sb.bsums[2 * j], s1 = sb.bsums[2 * j + 1];
        o.s = offset || weight == DType::Q2_K ? 0.f : sb.d * static_cast<float>(s0 + s1);
        // Q2_K's mins are per half: the halves' sums themselves (ActBlock).
        o.c0 = weight == DType::Q2_K ? s0 : weight == DType::IQ4_XS ? -offset * (s0 + s1) : -offset * s0;
        o.c1 = weight == DType::Q2_K ? s1 : weight == DType::IQ4_XS ? 0 : -offset * s1;
      }
      return;
    }
    default: fail("gemm", "no panel format for type {}", dtype_name(weight));
  }
}

void quantize_act_blocks(const TypeKernels& k, const float* x, int64_t n, ActBlock* out, int64_t n_tokens,
                         uint8_t* row) {
  static constexpr std::array<legacy::ActBlocksFn (*)(DType), kIsaCount> kFind = {
      legacy::act_blocks<Isa::Scalar>, legacy::act_blocks<Isa::Avx2>, legacy::act_blocks<Isa::Avx512>};
  if (const legacy::ActBlocksFn fused = kFind[static_cast<int>(k.isa)](k.type)) return fused(x, n, out, n_tokens);
  k.quantize_act(x, row, n);
  prepare_act_row(k.type, row, n, out, n_tokens);
}

void pack_panel(const WeightMatrix& w, int64_t r0, int n_rows, uint8_t* panel) {
  WEFT_ASSERT(n_rows >= 1 && n_rows <= kPanelRows && r0 + n_rows <= w.rows);
  const PanelFormat f = panel_format(w.type);
  const int64_t nb = w.cols / kQK;
  const size_t bb = f.block_bytes();
  if (n_rows < kPanelRows) std::memset(panel, 0, bb * nb);  // absent rows: zero levels and scales
  Unpacked u{};
  for (int r = 0; r < n_rows; ++r) {
    const uint8_t* row = w.data + (r0 + r) * w.row_stride;
    for (int64_t b = 0; b < nb; ++b) {
      unpack_block(w.type, row, b, u);
      uint8_t* pb = panel + b * bb;
      for (int g = 0; g < kGroups; ++g) std::memcpy(pb + 64 * g + 4 * r, u.q + 4 * g, 4);
      auto* sc = reinterpret_cast<float*>(pb + kGroups * 64);
      for (int s = 0; s < f.n_scales; ++s) sc[16 * s + r] = u.sc[s];
      if (f.has_min) sc[16 * f.n_scales + r] = u.mn;
    }
  }
}

void gemm_ref(const WeightMatrix& w, int64_t r0, int64_t r1, const ActBlock* act, int64_t n_tokens, float* y,
              int64_t ldy) {
  WEFT_ASSERT(r0 % kPanelRows == 0 && r1 <= w.rows);
  const PanelFormat f = panel_format(w.type);
  const int64_t nb = w.cols / kQK;
  const size_t bb = f.block_bytes();
  std::vector<uint8_t> panel(bb * nb);
  const int per_scale = kGroups / f.n_scales;
  for (int64_t p = r0; p < r1; p += kPanelRows) {
    const int n_rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
    pack_panel(w, p, n_rows, panel.data());
    for (int r = 0; r < n_rows; ++r)
      for (int64_t t = 0; t < n_tokens; ++t) {
        float acc = 0;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* pb = panel.data() + b * bb;
          const auto* sc = reinterpret_cast<const float*>(pb + kGroups * 64);
          const ActBlock& a = act[b * n_tokens + t];
          for (int s = 0; s < f.n_scales; ++s) {
            int32_t sumi = f.has_corr ? (s == 0 ? a.c0 : a.c1) : 0;
            for (int g = s * per_scale; g < (s + 1) * per_scale; ++g)
              for (int k = 0; k < 4; ++k) sumi += pb[64 * g + 4 * r + k] * a.q[4 * g + k];
            acc += static_cast<float>(sumi) * (sc[16 * s + r] * a.d);
          }
          if (f.has_min) acc += sc[16 * f.n_scales + r] * a.s;
        }
        y[t * ldy + p + r] = acc;
      }
  }
}

bool has_repacked(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
         t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_NL || t == DType::IQ4_XS || t == DType::MXFP4;
}

size_t repacked_panel_bytes(DType t, int64_t cols) {
  const int64_t values = int64_t{kQK} * repacked_sub_blocks(t);
  WEFT_ASSERT(has_repacked(t) && cols % values == 0);
  return static_cast<size_t>(cols / values) *
         (repacked_head_bytes(t) + static_cast<size_t>(repacked_sub_blocks(t)) * repacked_block_bytes(t));
}

size_t repacked_bytes(const WeightMatrix& w) {
  const int64_t n_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  return static_cast<size_t>(n_panels) * repacked_panel_bytes(w.type, w.cols);
}

namespace {

// The repacks below move four bytes of a row at a time (one dword lane of a panel vector): value
// by value they made loading a K-quant model take seconds.

// Bit `bit` of each of the four bytes at p, as a nibble (byte i -> bit i): the multiply moves byte
// i's bit to bit 24 + i, and every other product lands below bit 24 without carrying, or past 31.
inline unsigned byte_bits(const uint8_t* p, int bit) {
  return (((load_u32(p) >> bit) & 0x01010101u) * 0x01020408u) >> 24;
}

inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// A sub-block's one-bit values (Q5's fifth bits, Q3_K's third bits), value 4g + i's bit at bit
// 4g + i of w, into row r's lane of a bit-plane vector at plane: byte 4r + i holds the bits of
// values 4g + i at bits g. A reader moves group g's bits into place with one shift and one and.
inline void put_bit_plane(uint8_t* plane, int r, uint32_t w) {
  uint32_t lane = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t t = (w >> i) & 0x11111111u;  // value 4g + i's bit at bit 4g
    t = (t | t >> 3) & 0x03030303u;       // groups 2k and 2k + 1 at bits 0 and 1 of byte k
    t = (t | t >> 6) & 0x000F000Fu;       // groups 4k .. 4k + 3 at bits 0 .. 3 of byte 2k
    t = (t | t >> 12) & 0xFFu;            // all eight in byte 0
    lane |= t << (8 * i);
  }
  store_u32(plane + 4 * r, lane);
}

// Bit j of each of the 32 bytes at p, byte v's at bit v (Q5_K's qh and Q3_K's hmask hold sub-block
// j's bit of value v in bit j of byte v).
inline uint32_t bits_of_bytes(const uint8_t* p, int j) {
  uint32_t w = 0;
  for (int g = 0; g < kGroups; ++g) w |= byte_bits(p + 4 * g, j) << (4 * g);
  return w;
}

// Row r's 16 bytes of nibbles, already paired as Q4_0 pairs them (value i | value i + 16 << 4), into
// a panel block's four level vectors: lane r of vector k takes bytes 4k .. 4k + 3.
inline void put_paired_nibbles(const uint8_t* qs, int r, uint8_t* pb) {
  for (int k = 0; k < 4; ++k) std::memcpy(pb + 64 * k + 4 * r, qs + 4 * k, 4);
}

// Row r's block into panel block ob (layouts in gemm_q8.h).
template <class Block>
void repack_block(const Block& blk, int r, uint8_t* ob) {
  constexpr bool kQ8 = std::is_same_v<Block, BlockQ8_0>;
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>;
  constexpr bool kMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  using L = RepackedLayout<kQ8 ? DType::Q8_0 : kQ5 ? DType::Q5_0 : DType::Q4_0>;  // Q4_1 / Q5_1: their offsets
  if constexpr (kQ8) {
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 4; ++i) ob[64 * k + 4 * r + i] = static_cast<uint8_t>(blk.qs[4 * k + i] ^ 0x80);  // + 128
  } else {
    put_paired_nibbles(blk.qs, r, ob + L::kLevels);
  }
  if constexpr (kQ5) put_bit_plane(ob, r, load_u32(blk.qh));  // bit v of qh: value v's fifth bit
  std::memcpy(ob + L::kScaleOffset + 2 * r, &blk.d, 2);
  if constexpr (kMin) std::memcpy(ob + L::kScaleOffset + 2 * kPanelRows + 2 * r, &blk.m, 2);
}

// Row r's 32 four-bit levels of a sub-block, bits shift .. shift + 3 of the bytes at q, into a
// panel block's four level vectors, paired as Q4_0 pairs them: byte i of the row's 16 is value i |
// value i + 16 << 4, lane r of vector k its bytes 4k .. 4k + 3.
void put_nibble_pairs(const uint8_t* q, int shift, int r, uint8_t* sb) {
  for (int k = 0; k < 4; ++k) {
    const uint32_t lo = (load_u32(q + 4 * k) >> shift) & 0x0F0F0F0Fu;
    const uint32_t hi = (load_u32(q + 16 + 4 * k) >> shift) & 0x0F0F0F0Fu;
    store_u32(sb + 64 * k + 4 * r, lo | hi << 4);
  }
}

// Two-bit levels of sub-block j of row r into a panel sub-block's two vectors v0, v1: group g at
// bits 2 (g % 4) of byte 4r + i of vector g / 4. Sub-block j's level l is bits 2 (j % 4) of
// q[32 (j / 4) + l]: Q2_K / Q3_K's qs (kquants::q2_level) and Q6_K's top bits in qh alike.
void put_two_bit_levels(const uint8_t* q, int j, int r, uint8_t* v0, uint8_t* v1) {
  const uint8_t* src = q + 32 * (j / 4);
  const int shift = 2 * (j % 4);
  for (int v = 0; v < 2; ++v) {  // lane r of vector v: groups 4v .. 4v + 3
    uint32_t lane = 0;
    for (int k = 0; k < 4; ++k) lane |= ((load_u32(src + 4 * (4 * v + k)) >> shift) & 0x03030303u) << (2 * k);
    store_u32((v ? v1 : v0) + 4 * r, lane);
  }
}

// Row r's super-block into a K-quant panel's super-block ob (gemm_q8.h): its d and dmin and its
// scales and mins packed as KScaleLayout, then per sub-block the levels as a Q4_0 / Q5_0 block.
template <class Block>
void repack_k_block(const Block& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<std::is_same_v<Block, BlockQ5K> ? DType::Q5_K : DType::Q4_K>;
  using S = KScaleLayout;
  std::memcpy(ob + 2 * r, &blk.d, 2);
  std::memcpy(ob + 2 * kPanelRows + 2 * r, &blk.dmin, 2);
  uint8_t sm[2][8];  // [0]: scales, [1]: mins
  kquants::unpack_scales_mins(blk.scales, sm[0], sm[1]);
  for (int i = r; i < 64; i += kPanelRows) {  // the bytes of row r in each decoded vector O_k
    uint8_t low[2] = {}, high = 0;
    for (int k = 0; k < 4; ++k) {
      const int j = 2 * k + i / 32, min = i / 16 % 2;
      WEFT_ASSERT(S::decoded(j, min, r) == 64 * k + i);
      const uint8_t v = sm[min][j];
      low[k % 2] |= static_cast<uint8_t>((v & 0x0F) << (4 * (k / 2)));
      high |= static_cast<uint8_t>((v >> 4) << (2 * k));
    }
    ob[S::kLow + i] = low[0];
    ob[S::kLow + 64 + i] = low[1];
    ob[S::kHigh + i] = high;
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t* sb = ob + L::kHead + j * L::kBlockBytes;
    put_nibble_pairs(blk.qs + 32 * (j / 2), 4 * (j & 1), r, sb + L::kLevels);
    if constexpr (L::kQ5) put_bit_plane(sb, r, bits_of_bytes(blk.qh, j));
  }
}

// Row r's Q6_K super-block into a panel's super-block ob (gemm_q8.h): its d, then per sub-block
// the low four bits of its levels as a Q4_0 block, their top two bits and the scales of its halves.
void repack_q6_k_block(const BlockQ6K& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<DType::Q6_K>;
  std::memcpy(ob + 2 * r, &blk.d, 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t* sb = ob + L::kHead + j * L::kBlockBytes;
    const int h = j / 4, p = j % 4;
    put_nibble_pairs(blk.ql + 64 * h + 32 * (p & 1), p < 2 ? 0 : 4, r, sb + L::kLevels);
    put_two_bit_levels(blk.qh, j, r, sb, sb + L::top_bits(1));
    sb[L::kScaleOffset + r] = static_cast<uint8_t>(blk.scales[8 * h + 2 * p]);
    sb[L::kScaleOffset + kPanelRows + r] = static_cast<uint8_t>(blk.scales[8 * h + 2 * p + 1]);
  }
}

// Row r's Q3_K super-block into a panel's super-block ob (gemm_q8.h): its d, then per sub-block the
// two low bits of its levels (laid out as Q6_K's top bits), the third bits as masks and the int8
// scales of its halves. Value 32j + l of the super-block is value l of sub-block j.
void repack_q3_k_block(const BlockQ3K& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<DType::Q3_K>;
  std::memcpy(ob + 2 * r, &blk.d, 2);
  int8_t sc[16];
  kquants::unpack_q3_scales(blk.scales, sc);
  for (int j = 0; j < 8; ++j) {
    uint8_t* sb = ob + L::kHead + j * L::kBlockBytes;
    put_bit_plane(sb, r, bits_of_bytes(blk.hmask, j));  // value 32j + v's third bit (q3_third_bit)
    put_two_bit_levels(blk.qs, j, r, sb + L::kLevels, sb + L::kLevels + 64);
    sb[L::kScaleOffset + r] = static_cast<uint8_t>(sc[2 * j]);
    sb[L::kScaleOffset + kPanelRows + r] = static_cast<uint8_t>(sc[2 * j + 1]);
  }
}

// Row r's Q2_K super-block into a panel's super-block ob (gemm_q8.h): its d and dmin, then per
// sub-block the levels (as Q3_K's two low bits) and ggml's scale | min byte of each half.
void repack_q2_k_block(const BlockQ2K& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<DType::Q2_K>;
  std::memcpy(ob + 2 * r, &blk.d, 2);
  std::memcpy(ob + 2 * kPanelRows + 2 * r, &blk.dmin, 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t* sb = ob + L::kHead + j * L::kBlockBytes;
    put_two_bit_levels(blk.qs, j, r, sb + L::kLevels, sb + L::kLevels + 64);
    sb[L::kScaleOffset + r] = blk.scales[2 * j];
    sb[L::kScaleOffset + kPanelRows + r] = blk.scales[2 * j + 1];
  }
}

// Row r's IQ4_XS super-block into a panel's super-block ob (gemm_q8.h): its d, then per sub-block
// its 16 bytes of indices laid out as a Q4_0 block's and its int8 scale ls - 32.
void repack_iq4_xs_block(const BlockIQ4XS& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<DType::IQ4_XS>;
  std::memcpy(ob + 2 * r, &blk.d, 2);
  for (int ib = 0; ib < 8; ++ib) {
    uint8_t* sb = ob + L::kHead + ib * L::kBlockBytes;
    put_paired_nibbles(blk.qs + 16 * ib, r, sb);
    sb[L::kScaleOffset + r] = static_cast<uint8_t>(iquants::iq4xs_scale(blk, ib) - 32);
  }
}

// Row r's MXFP4 block into panel block ob (gemm_q8.h): its indices as IQ4_NL's, then its E8M0 byte.
void repack_mxfp4_block(const BlockMXFP4& blk, int r, uint8_t* ob) {
  using L = RepackedLayout<DType::MXFP4>;
  put_paired_nibbles(blk.qs, r, ob + L::kLevels);
  ob[L::kScaleOffset + r] = blk.e;
}

// Every panel of w: its rows' units (blocks of the legacy types, super-blocks of the K-quants,
// `Block` in ggml's rows, unit_values values each) through repack_unit(block, row, unit's bytes).
template <class Block>
void repack_panels(const WeightMatrix& w, uint8_t* dst, int64_t p0, int64_t p1, int64_t unit_values,
                   void (*repack_unit)(const Block&, int, uint8_t*)) {
  const size_t unit_bytes = repacked_panel_bytes(w.type, unit_values);
  const int64_t n_units = w.cols / unit_values;
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* out = dst + p * n_units * unit_bytes;
    const int n_rows = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
    std::memset(out, 0, n_units * unit_bytes);  // absent rows: zero scales and levels
    for (int r = 0; r < n_rows; ++r) {
      const auto* blocks = reinterpret_cast<const Block*>(w.data + (p * kPanelRows + r) * w.row_stride);
      for (int64_t i = 0; i < n_units; ++i) repack_unit(blocks[i], r, out + i * unit_bytes);
    }
  }
}

}  // namespace

void repack(const WeightMatrix& w, uint8_t* dst, int64_t p0, int64_t p1) {
  WEFT_ASSERT(w.layout == WeightLayout::Rows && has_repacked(w.type));
  WEFT_ASSERT(0 <= p0 && p0 <= p1 && p1 <= (w.rows + kPanelRows - 1) / kPanelRows);
  switch (w.type) {
    case DType::Q4_K: return repack_panels<BlockQ4K>(w, dst, p0, p1, 256, repack_k_block<BlockQ4K>);
    case DType::Q5_K: return repack_panels<BlockQ5K>(w, dst, p0, p1, 256, repack_k_block<BlockQ5K>);
    case DType::Q6_K: return repack_panels<BlockQ6K>(w, dst, p0, p1, 256, repack_q6_k_block);
    case DType::Q3_K: return repack_panels<BlockQ3K>(w, dst, p0, p1, 256, repack_q3_k_block);
    case DType::Q2_K: return repack_panels<BlockQ2K>(w, dst, p0, p1, 256, repack_q2_k_block);
    case DType::IQ4_XS: return repack_panels<BlockIQ4XS>(w, dst, p0, p1, 256, repack_iq4_xs_block);
    case DType::IQ4_NL:  // Q4_0's block, the nibbles grid indices
    case DType::Q4_0: return repack_panels<BlockQ4_0>(w, dst, p0, p1, kQK, repack_block<BlockQ4_0>);
    case DType::MXFP4: return repack_panels<BlockMXFP4>(w, dst, p0, p1, kQK, repack_mxfp4_block);
    case DType::Q4_1: return repack_panels<BlockQ4_1>(w, dst, p0, p1, kQK, repack_block<BlockQ4_1>);
    case DType::Q5_0: return repack_panels<BlockQ5_0>(w, dst, p0, p1, kQK, repack_block<BlockQ5_0>);
    case DType::Q5_1: return repack_panels<BlockQ5_1>(w, dst, p0, p1, kQK, repack_block<BlockQ5_1>);
    default: return repack_panels<BlockQ8_0>(w, dst, p0, p1, kQK, repack_block<BlockQ8_0>);
  }
}

uint8_t* panel_buffer(size_t n_bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < n_bytes + 64) buf.resize(n_bytes + 64);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64);
}

template <>
GemmFn find<Isa::Scalar>(DType) {
  return nullptr;  // the scalar level's prompts run rows_dot; gemm_ref is the tests' reference
}

GemmFn find(Isa isa, DType t) {
  static constexpr std::array<GemmFn (*)(DType), kIsaCount> kFind = {find<Isa::Scalar>, find<Isa::Avx2>,
                                                                     find<Isa::Avx512>};
  return isa_supported(isa) ? kFind[static_cast<int>(isa)](t) : nullptr;
}

template <>
GemmFn find_repacked<Isa::Scalar>(DType) {
  return nullptr;  // the scalar level reads ggml's rows
}

GemmFn find_repacked(Isa isa, DType t) {
  static constexpr std::array<GemmFn (*)(DType), kIsaCount> kFind = {
      find_repacked<Isa::Scalar>, find_repacked<Isa::Avx2>, find_repacked<Isa::Avx512>};
  if (!isa_supported(isa) || !has_repacked(t)) return nullptr;
  if (isa == Isa::Avx2)
    if (const GemmFn vnni = find_avx_vnni(t)) return vnni;
  return kFind[static_cast<int>(isa)](t);
}

}  // namespace weft::kernels::gemm
