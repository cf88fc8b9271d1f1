#include "net/wire.h"

#include "core/error.h"

#include <bit>
#include <cstring>

namespace weft::net {

void ByteWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void ByteWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void ByteWriter::f32(float v) { u32(std::bit_cast<uint32_t>(v)); }
void ByteWriter::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
void ByteWriter::str(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
}
void ByteWriter::bytes(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
void ByteWriter::f32s(std::span<const float> v) {
  u32(static_cast<uint32_t>(v.size()));
  buf_.reserve(buf_.size() + 4 * v.size());
  for (float x : v) f32(x);
}
void ByteWriter::i32s(std::span<const int32_t> v) {
  u32(static_cast<uint32_t>(v.size()));
  for (int32_t x : v) i32(x);
}

void ByteReader::need(size_t n, const char* what) {
  if (n > left()) fail("net", "message truncated reading {}: need {} bytes, {} left", what, n, left());
}
uint8_t ByteReader::u8(const char* what) {
  need(1, what);
  return b_[pos_++];
}
uint32_t ByteReader::u32(const char* what) {
  need(4, what);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b_[pos_ + i]) << (8 * i);
  pos_ += 4;
  return v;
}
uint64_t ByteReader::u64(const char* what) {
  need(8, what);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b_[pos_ + i]) << (8 * i);
  pos_ += 8;
  return v;
}
float ByteReader::f32(const char* what) { return std::bit_cast<float>(u32(what)); }
double ByteReader::f64(const char* what) { return std::bit_cast<double>(u64(what)); }
bool ByteReader::boolean(const char* what) {
  const uint8_t v = u8(what);
  if (v > 1) fail("net", "{}: {} is not a boolean", what, v);
  return v == 1;
}
uint32_t ByteReader::count(const char* what, size_t max, size_t min_item_bytes) {
  const uint32_t n = u32(what);
  if (n > max) fail("net", "{}: count {} exceeds the limit {}", what, n, max);
  if (min_item_bytes && n > left() / min_item_bytes)
    fail("net", "{}: count {} needs more than the {} bytes left", what, n, left());
  return n;
}
std::string ByteReader::str(const char* what, size_t max_len) {
  const uint32_t n = count(what, max_len, 1);
  need(n, what);
  std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
  pos_ += n;
  return s;
}
std::span<const uint8_t> ByteReader::bytes(const char* what, size_t n) {
  need(n, what);
  auto s = b_.subspan(pos_, n);
  pos_ += n;
  return s;
}
std::vector<float> ByteReader::f32s(const char* what, size_t max_count) {
  const uint32_t n = count(what, max_count, 4);
  std::vector<float> v(n);
  for (auto& x : v) x = f32(what);
  return v;
}
std::vector<int32_t> ByteReader::i32s(const char* what, size_t max_count) {
  const uint32_t n = count(what, max_count, 4);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = i32(what);
  return v;
}
void ByteReader::finish(const char* message) {
  if (left()) fail("net", "{}: {} unexpected trailing bytes", message, left());
}

}  // namespace weft::net
