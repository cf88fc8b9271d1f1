// GGUF v3 writer: metadata in insertion order, tensors aligned to general.alignment (32).
#pragma once

#include "core/dtype.h"
#include "gguf/gguf_reader.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace weft::gguf {

class Writer {
 public:
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_bool_array(const std::string& key, const std::vector<bool>& v);
  void set_value(const std::string& key, const Value& v);  // copy a value from a reader

  // shape in ggml order (shape[0] = row length); data holds row_bytes(type, shape[0]) * rows.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> data);
  // Lazily produced tensor: fill(dst) is called during write() with a buffer of the tensor's size,
  // so multi-GiB models are generated without holding them in memory.
  using Fill = std::function<void(uint8_t* dst, size_t n_bytes)>;
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, Fill fill);

  void write(const std::string& path) const;
  std::vector<uint8_t> to_bytes() const;
  // As llama-gguf-split --split-max-tensors: parts of at most max_tensors tensors each, named
  // split_part_path(prefix, k, n); the first holds all the metadata, every part split.no,
  // split.count and split.tensors.count. Returns the paths written, in order.
  std::vector<std::string> write_split(const std::string& prefix, size_t max_tensors) const;

  // The file without its tensor data, for callers that place the data themselves (a worker
  // receiving weights straight into their final place): the bytes before the data section, each
  // tensor's data offset from the start of the file, and the file's size. Padding is zeros.
  struct Layout {
    std::vector<uint8_t> head;
    std::vector<uint64_t> offsets;
    uint64_t size = 0;
  };
  Layout layout() const;

 private:
  struct Kv {
    std::string key;
    Value value;
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;  // or, when empty, produced by fill
    Fill fill;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace weft::gguf
