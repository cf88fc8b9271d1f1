#include "tokenizer/unicode.h"

#include "core/error.h"

#include <algorithm>
#include <array>

namespace weft::tokenizer::unicode {

Category category(uint32_t cp) {
  if (cp > kMaxCodePoint) return Category::Other;
  const CategoryRange* end = kCategoryRanges + kCategoryRangeCount;
  // Last range whose start is <= cp; the table starts at 0 so there always is one.
  const CategoryRange* it =
      std::upper_bound(kCategoryRanges, end, cp, [](uint32_t v, const CategoryRange& r) { return v < r.first; });
  WEFT_ASSERT(it != kCategoryRanges);
  return (it - 1)->category;
}

bool is_whitespace(uint32_t cp) {
  // White_Space from Unicode's PropList.txt (stable since 6.3): 25 code points.
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t utf8_len(uint8_t lead) {
  // Indexed by the high nibble: 0xxx -> 1, 10xx (continuation) -> 1, 110x -> 2, 1110 -> 3, 1111 -> 4.
  static constexpr std::array<uint8_t, 16> kLen = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

std::vector<CodePoint> decode_utf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    uint32_t cp = kReplacement;
    size_t len = 1;
    if (b < 0x80) {
      cp = b;
    } else {
      size_t want = 0;
      uint32_t v = 0, min = 0;
      if ((b & 0xE0) == 0xC0)
        want = 2, v = b & 0x1F, min = 0x80;
      else if ((b & 0xF0) == 0xE0)
        want = 3, v = b & 0x0F, min = 0x800;
      else if ((b & 0xF8) == 0xF0)
        want = 4, v = b & 0x07, min = 0x10000;
      bool ok = want != 0 && i + want <= n;
      for (size_t k = 1; ok && k < want; ++k) {
        ok = (s[i + k] & 0xC0) == 0x80;
        v = (v << 6) | (s[i + k] & 0x3F);
      }
      // Reject overlong forms, surrogates and values past U+10FFFF: they are not text.
      if (ok && v >= min && v <= kMaxCodePoint && !(v >= 0xD800 && v <= 0xDFFF)) {
        cp = v;
        len = want;
      }
    }
    out.push_back({cp, static_cast<uint32_t>(i), static_cast<uint32_t>(len)});
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    WEFT_ASSERT(cp <= kMaxCodePoint);
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF keep their value; the
// remaining 68 bytes (controls, space, 0x7F..0xA0, 0xAD) take 256, 257, ... in byte order.
struct ByteMap {
  std::array<uint32_t, 256> cp_of_byte{};
  std::array<std::string, 256> utf8_of_byte;
  std::array<int16_t, 512> byte_of_cp{};  // all mapped code points are < 256 + 68

  ByteMap() {
    byte_of_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keeps = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cp_of_byte[b] = keeps ? static_cast<uint32_t>(b) : next++;
      append_utf8(utf8_of_byte[b], cp_of_byte[b]);
      byte_of_cp[cp_of_byte[b]] = static_cast<int16_t>(b);
    }
    WEFT_ASSERT(next == 256 + 68);
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return byte_map().utf8_of_byte[byte]; }

int symbol_to_byte(uint32_t cp) { return cp < byte_map().byte_of_cp.size() ? byte_map().byte_of_cp[cp] : -1; }

std::string bytes_to_symbols(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += byte_to_symbol(static_cast<uint8_t>(c));
  return out;
}

std::string symbols_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const CodePoint& c : decode_utf8(text)) {
    const int b = symbol_to_byte(c.cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(c.offset, c.n_bytes));
    }
  }
  return out;
}

}  // namespace weft::tokenizer::unicode
