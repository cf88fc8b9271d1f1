// GGUF v2/v3 reader: the file is mmap'd; every count, length, offset, alignment, type and dimension
// is validated (with overflow checks) before use, so a hostile file gives weft::Error("gguf", ...)
// naming what is wrong, never a crash or a huge allocation.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace weft::gguf {

// GGUF spec: keys are at most 2^16 - 1 bytes (the reader holds tensor names to the same bound).
inline constexpr uint64_t kMaxKeyBytes = 65535;

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(ValueType t);  // "u8", "string", "array"; "?" for unknown ids
// Arrays of arrays nest at most this deep (an array of scalars has depth 1); deeper is rejected.
inline constexpr int kMaxArrayDepth = 3;

struct Value;
using Array = std::vector<Value>;
// Scalars widen to the largest type of their kind; `type` keeps what the file said.
struct Value {
  ValueType type = ValueType::U32;
  ValueType elem_type = ValueType::U32;  // for arrays
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

  bool is_array() const { return type == ValueType::Array; }
  // Typed access; throw weft::Error naming the key when the value has another kind.
  uint64_t as_u64(const std::string& key) const;
  int64_t as_i64(const std::string& key) const;
  double as_f64(const std::string& key) const;
  bool as_bool(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  const Array& as_array(const std::string& key) const;
};

struct TensorInfo {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length (ne0)
  uint64_t offset = 0;         // from the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping (of the part holding it, in a split model)
  uint32_t part = 0;              // split model: the file holding it, 0 = the first (offset is in its data section)
  int64_t n_elements() const;
};

// llama.cpp's names for the parts of a split model (llama-gguf-split):
// split_part_path("m", 2, 3) == "m-00002-of-00003.gguf"; parts count from 1.
std::string split_part_path(const std::string& prefix, int part, int count);
// The paths of every part when `path` is named as the first part of a split model
// (<prefix>-00001-of-0000N.gguf, N > 1); empty otherwise. Says nothing of whether they exist.
std::vector<std::string> split_parts_named_by(const std::string& path);

class File {
 public:
  // A split model (split.count > 1 in its first part) is opened from its first part: every other
  // part is opened and checked (split.no, split.count, split.tensors.count, names, no tensor
  // twice) and its tensors join this File's, their data pointing into that part's mapping.
  // Metadata comes from the first part, as in llama.cpp.
  static std::unique_ptr<File> open(const std::string& path);
  // Parse from memory (tests, fuzzing); the buffer must outlive the File.
  static std::unique_ptr<File> parse(const uint8_t* data, size_t size, std::string origin = "buffer");
  ~File();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }  // this file (the first part of a split model)
  // Every file the model is read from, in order: this one, then a split model's other parts.
  const std::vector<std::string>& part_paths() const { return part_paths_; }
  uint64_t total_size() const;                           // bytes of every part
  uint64_t data_offset() const { return data_offset_; }  // start of the (aligned) data section

  const std::map<std::string, Value>& metadata() const { return kv_; }
  const std::vector<std::string>& key_order() const { return key_order_; }
  const Value* find(const std::string& key) const;
  // Convenience getters: throw when missing (no default) or of the wrong kind.
  std::string get_string(const std::string& key) const;
  std::optional<std::string> get_string_opt(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  std::optional<int64_t> get_int_opt(const std::string& key) const;
  std::optional<double> get_float_opt(const std::string& key) const;
  std::optional<bool> get_bool_opt(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The caller has copied [p, p + n) of the mapping and reads it no more: the pages it touches
  // leave this process's resident set (a later read, a neighbour's included, faults them back in
  // from the page cache), so a loaded model is resident once, not twice. Nothing for a parsed
  // buffer, which is not a mapping. release_data(): the whole data section, after a load (the
  // kernel may map the file with 2 MiB folios, which only a release covering them all frees).
  // In a split model both reach the part that holds the bytes (every part, for release_data).
  void release(const void* p, size_t n) const;
  void release_data() const;
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws when missing

 private:
  File() = default;
  static std::unique_ptr<File> open_one(const std::string& path);
  void parse_all(const uint8_t* data, size_t size);
  void open_split_parts();  // gguf_split.cpp

  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, Value> kv_;
  std::vector<std::string> key_order_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::string> part_paths_;
  std::vector<std::unique_ptr<File>> other_parts_;  // a split model's parts 2..N (own their mappings)
};

}  // namespace weft::gguf
