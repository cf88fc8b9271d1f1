// Test helper: a copy of a GGUF model with keys and tensors changed, to make malformed files.
#pragma once

#include "core/dtype.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft::test_support {

// A copy of a model with some u32 keys replaced (nullopt: removed) and tensors dropped or
// reshaped (the data is cut or padded with zeros to the new shape).
struct Edit {
  std::map<std::string, std::optional<uint32_t>> keys;
  std::map<std::string, std::optional<std::vector<int64_t>>> tensors;
  std::map<std::string, float> f32_keys;                   // added (or replaced) f32 keys
  std::map<std::string, std::vector<int32_t>> i32_arrays;  // added (or replaced) i32 array keys
};

inline std::vector<uint8_t> edited(const std::vector<uint8_t>& bytes, const Edit& e) {
  auto f = gguf::File::parse(bytes.data(), bytes.size());
  gguf::Writer w;
  for (const auto& k : f->key_order()) {
    const auto it = e.keys.find(k);
    if (e.f32_keys.count(k) || e.i32_arrays.count(k)) continue;
    if (it == e.keys.end())
      w.set_value(k, f->metadata().at(k));
    else if (it->second)
      w.set_u32(k, *it->second);
  }
  for (const auto& [k, v] : e.keys)
    if (v && !f->find(k)) w.set_u32(k, *v);
  for (const auto& [k, v] : e.f32_keys) w.set_f32(k, v);
  for (const auto& [k, v] : e.i32_arrays) w.set_i32_array(k, v);
  for (const auto& t : f->tensors()) {
    std::vector<int64_t> shape = t.shape;
    if (const auto it = e.tensors.find(t.name); it != e.tensors.end()) {
      if (!it->second) continue;
      shape = *it->second;
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> data(row_bytes(t.type, n), 0);
    std::copy_n(t.data, std::min<size_t>(data.size(), t.n_bytes), data.begin());
    w.add_tensor(t.name, t.type, shape, std::move(data));
  }
  return w.to_bytes();
}

}  // namespace weft::test_support
