// Explicit little-endian encoding of message fields. Every message is written field by field with
// ByteWriter and read back with ByteReader; nothing is memcpy'd from a struct, so the wire format
// does not depend on padding, endianness or compiler. The reader checks every length against the
// bytes left and a stated maximum before allocating, and throws weft::Error("net", ...) naming the field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::net {

class ByteWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f32(float v);
  void f64(double v);
  void str(std::string_view s);            // u32 length + bytes
  void bytes(std::span<const uint8_t> b);  // raw, no length
  void f32s(std::span<const float> v);     // u32 count + values
  void i32s(std::span<const int32_t> v);   // u32 count + values
  std::vector<uint8_t>& data() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> b) : b_(b) {}
  uint8_t u8(const char* what);
  uint32_t u32(const char* what);
  uint64_t u64(const char* what);
  int32_t i32(const char* what) { return static_cast<int32_t>(u32(what)); }
  int64_t i64(const char* what) { return static_cast<int64_t>(u64(what)); }
  float f32(const char* what);
  double f64(const char* what);
  bool boolean(const char* what);  // a u8 that must be 0 or 1
  std::string str(const char* what, size_t max_len);
  std::span<const uint8_t> bytes(const char* what, size_t n);
  std::vector<float> f32s(const char* what, size_t max_count);
  std::vector<int32_t> i32s(const char* what, size_t max_count);
  // A u32 count checked against max (and against the bytes left at min_item_bytes per item).
  uint32_t count(const char* what, size_t max, size_t min_item_bytes);
  size_t left() const { return b_.size() - pos_; }
  // Throws unless every byte was consumed (trailing garbage is an error, not ignored).
  void finish(const char* message);

 private:
  void need(size_t n, const char* what);
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
};

}  // namespace weft::net
