// GGUF v3 writer. The whole file goes through one Sink, so to_bytes() (tests) and write() (a
// buffered FILE*, multi-GiB models) share every byte of layout logic. Tensor data is padded to the
// alignment, the last tensor too, as ggml does, so readers that load the padded data section whole
// also accept our files.
#include "gguf/gguf_writer.h"

#include "core/error.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace weft::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr size_t kFileBufferBytes = size_t{4} << 20;

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const void* p, size_t n) = 0;
  uint64_t pos() const { return pos_; }

  template <typename T>
  void put(T v) {
    write(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }
  void pad_to(uint64_t target) {
    static const uint8_t kZeros[64] = {};
    WEFT_ASSERT(target >= pos_);
    while (pos_ < target) write(kZeros, static_cast<size_t>(std::min<uint64_t>(sizeof(kZeros), target - pos_)));
  }

 protected:
  uint64_t pos_ = 0;
};

class VectorSink final : public Sink {
 public:
  explicit VectorSink(std::vector<uint8_t>& out) : out_(out) {}
  void write(const void* p, size_t n) override {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
    pos_ += n;
  }

 private:
  std::vector<uint8_t>& out_;
};

class FileSink final : public Sink {
 public:
  FileSink(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  void write(const void* p, size_t n) override {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n)
      fail("gguf", "{}: write failed at byte {}: {}", path_, pos_, std::strerror(errno));
    pos_ += n;
  }

 private:
  std::FILE* f_;
  const std::string& path_;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Checks the variant holds what `type` says and the value fits, then writes it.
template <typename Stored, typename Wire>
void put_checked(Sink& s, const Value& v, const std::string& key) {
  const auto* x = std::get_if<Stored>(&v.v);
  if (!x) fail("gguf", "writer: key '{}' of type {} holds a value of another kind", key, value_type_name(v.type));
  if constexpr (std::is_integral_v<Wire>) {
    if (*x < static_cast<Stored>(std::numeric_limits<Wire>::min()) ||
        *x > static_cast<Stored>(std::numeric_limits<Wire>::max()))
      fail("gguf", "writer: key '{}' value {} does not fit in {}", key, *x, value_type_name(v.type));
  }
  s.put(static_cast<Wire>(*x));
}

void put_value(Sink& s, const Value& v, const std::string& key, int depth) {
  switch (v.type) {
    case ValueType::U8: return put_checked<uint64_t, uint8_t>(s, v, key);
    case ValueType::I8: return put_checked<int64_t, int8_t>(s, v, key);
    case ValueType::U16: return put_checked<uint64_t, uint16_t>(s, v, key);
    case ValueType::I16: return put_checked<int64_t, int16_t>(s, v, key);
    case ValueType::U32: return put_checked<uint64_t, uint32_t>(s, v, key);
    case ValueType::I32: return put_checked<int64_t, int32_t>(s, v, key);
    case ValueType::U64: return put_checked<uint64_t, uint64_t>(s, v, key);
    case ValueType::I64: return put_checked<int64_t, int64_t>(s, v, key);
    case ValueType::F32: return put_checked<double, float>(s, v, key);
    case ValueType::F64: return put_checked<double, double>(s, v, key);
    case ValueType::Bool: return put_checked<bool, uint8_t>(s, v, key);
    case ValueType::String: return s.put_string(v.as_string(key));
    case ValueType::Array: {
      if (depth + 1 > kMaxArrayDepth) fail("gguf", "writer: key '{}' nests arrays deeper than {}", key, kMaxArrayDepth);
      const Array& a = v.as_array(key);
      s.put(static_cast<uint32_t>(v.elem_type));
      s.put<uint64_t>(a.size());
      for (const auto& e : a) {
        if (e.type != v.elem_type)
          fail("gguf", "writer: key '{}' is an array of {} holding a {}", key, value_type_name(v.elem_type),
               value_type_name(e.type));
        put_value(s, e, key, depth + 1);
      }
      return;
    }
  }
  fail("gguf", "writer: key '{}' has unknown value type {}", key, static_cast<uint32_t>(v.type));
}

Value scalar(ValueType t, decltype(Value::v) v) {
  Value out;
  out.type = t;
  out.v = std::move(v);
  return out;
}

template <typename T, typename F>
Value array_of(ValueType elem, const std::vector<T>& xs, F to_value) {
  auto arr = std::make_shared<Array>();
  arr->reserve(xs.size());
  for (const auto& x : xs) arr->push_back(to_value(x));
  Value out = scalar(ValueType::Array, std::move(arr));
  out.elem_type = elem;
  return out;
}

// Bytes of a tensor, validating the shape like the reader does so we never write an unreadable file.
uint64_t tensor_bytes(const std::string& name, DType type, const std::vector<int64_t>& shape) {
  if (name.empty()) fail("gguf", "writer: empty tensor name");
  if (shape.empty() || shape.size() > 4)
    fail("gguf", "writer: tensor '{}' has {} dims (must be 1..4)", name, shape.size());
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) fail("gguf", "writer: tensor '{}' has bad dim {}", name, d);
  }
  const auto& tr = traits(type);
  if (shape[0] % tr.block_size != 0)
    fail("gguf", "writer: tensor '{}' row length {} is not a multiple of the {} block size {}", name, shape[0], tr.name,
         tr.block_size);
  if (shape[0] == 0) return 0;
  uint64_t bytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(row_bytes(type, shape[0])), static_cast<uint64_t>(n / shape[0]),
                             &bytes))
    fail("gguf", "writer: tensor '{}' byte size overflows", name);
  return bytes;
}

}  // namespace

void Writer::set_value(const std::string& key, const Value& v) {
  if (key.empty() || key.size() > kMaxKeyBytes) fail("gguf", "writer: bad key length {}", key.size());
  for (auto& kv : kvs_) {
    if (kv.key == key) {  // replace in place: the key keeps its first position
      kv.value = v;
      return;
    }
  }
  kvs_.push_back({key, v});
}

void Writer::set_u32(const std::string& key, uint32_t v) { set_value(key, scalar(ValueType::U32, uint64_t{v})); }
void Writer::set_i32(const std::string& key, int32_t v) { set_value(key, scalar(ValueType::I32, int64_t{v})); }
void Writer::set_u64(const std::string& key, uint64_t v) { set_value(key, scalar(ValueType::U64, v)); }
void Writer::set_f32(const std::string& key, float v) { set_value(key, scalar(ValueType::F32, double{v})); }
void Writer::set_bool(const std::string& key, bool v) { set_value(key, scalar(ValueType::Bool, v)); }
void Writer::set_string(const std::string& key, const std::string& v) { set_value(key, scalar(ValueType::String, v)); }

void Writer::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set_value(key, array_of(ValueType::String, v, [](const std::string& s) { return scalar(ValueType::String, s); }));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set_value(key, array_of(ValueType::F32, v, [](float f) { return scalar(ValueType::F32, double{f}); }));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set_value(key, array_of(ValueType::I32, v, [](int32_t i) { return scalar(ValueType::I32, int64_t{i}); }));
}

void Writer::set_bool_array(const std::string& key, const std::vector<bool>& v) {
  set_value(key, array_of(ValueType::Bool, v, [](bool b) { return scalar(ValueType::Bool, b); }));
}

void Writer::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> data) {
  const uint64_t n = tensor_bytes(name, type, shape);
  if (data.size() != n)
    fail("gguf", "writer: tensor '{}' has {} bytes of data, its shape needs {}", name, data.size(), n);
  for (const auto& t : tensors_)
    if (t.name == name) fail("gguf", "writer: duplicate tensor name '{}'", name);
  tensors_.push_back({name, type, std::move(shape), std::move(data), Fill{}});
}

void Writer::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, Fill fill) {
  tensor_bytes(name, type, shape);
  if (!fill) fail("gguf", "writer: tensor '{}' has an empty fill callback", name);
  for (const auto& t : tensors_)
    if (t.name == name) fail("gguf", "writer: duplicate tensor name '{}'", name);
  tensors_.push_back({name, type, std::move(shape), {}, std::move(fill)});
}

namespace {

// Where the data goes: each tensor's offset from the start of the file, and the file's size.
struct Placement {
  std::vector<uint64_t> offsets, sizes;
  uint64_t end = 0;
};

// Layout as in the header comment of gguf_reader.cpp: everything before the data section
// (metadata, tensor infos, padding). A template so it can take the Writer's private Kv / Tensor
// lists without naming their types.
template <typename Kvs, typename Tensors>
Placement write_head(Sink& s, const Kvs& kvs, const Tensors& tensors) {
  uint64_t alignment = kDefaultAlignment;
  for (const auto& kv : kvs) {
    if (kv.key != "general.alignment") continue;
    const bool is_unsigned = kv.value.type == ValueType::U8 || kv.value.type == ValueType::U16 ||
                             kv.value.type == ValueType::U32 || kv.value.type == ValueType::U64;
    alignment = is_unsigned ? kv.value.as_u64(kv.key) : 0;
    if (!std::has_single_bit(alignment)) fail("gguf", "writer: general.alignment must be a non-zero power of two");
  }

  s.write("GGUF", 4);
  s.put<uint32_t>(3);
  s.put<uint64_t>(tensors.size());
  s.put<uint64_t>(kvs.size());
  for (const auto& kv : kvs) {
    s.put_string(kv.key);
    s.put(static_cast<uint32_t>(kv.value.type));
    put_value(s, kv.value, kv.key, 0);
  }

  Placement p;
  uint64_t running = 0;
  for (const auto& t : tensors) {
    p.offsets.push_back(running);
    p.sizes.push_back(tensor_bytes(t.name, t.type, t.shape));
    running = align_up(running + p.sizes.back(), alignment);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    s.put_string(t.name);
    s.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (auto d : t.shape) s.put<int64_t>(d);
    s.put(static_cast<uint32_t>(t.type));
    s.put<uint64_t>(p.offsets[i]);
  }

  s.pad_to(align_up(s.pos(), alignment));
  for (auto& o : p.offsets) o += s.pos();
  p.end = s.pos() + running;
  return p;
}

template <typename Kvs, typename Tensors>
void serialize(Sink& s, const Kvs& kvs, const Tensors& tensors) {
  const Placement p = write_head(s, kvs, tensors);
  // One scratch buffer, grown to the largest lazily filled tensor: memory stays at one tensor.
  std::vector<uint8_t> scratch;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    s.pad_to(p.offsets[i]);
    if (t.fill) {
      scratch.assign(static_cast<size_t>(p.sizes[i]), 0);  // zeroed so an incomplete fill is deterministic
      t.fill(scratch.data(), scratch.size());
      s.write(scratch.data(), scratch.size());
    } else {
      WEFT_ASSERT(t.data.size() == p.sizes[i]);
      s.write(t.data.data(), t.data.size());
    }
  }
  s.pad_to(p.end);
}

}  // namespace

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(layout().size);  // one allocation: no regrowth copies of a multi-GiB image
  VectorSink sink(out);
  serialize(sink, kvs_, tensors_);
  return out;
}

Writer::Layout Writer::layout() const {
  Layout l;
  VectorSink sink(l.head);
  Placement p = write_head(sink, kvs_, tensors_);
  l.offsets = std::move(p.offsets);
  l.size = p.end;
  return l;
}

void Writer::write(const std::string& path) const {
  // Write beside the target and rename, so a failed write never leaves a truncated model behind.
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("gguf", "{}: cannot create: {}", tmp, std::strerror(errno));
  std::unique_ptr<char[]> buf(new char[kFileBufferBytes]);
  std::setvbuf(f, buf.get(), _IOFBF, kFileBufferBytes);
  try {
    FileSink sink(f, tmp);
    serialize(sink, kvs_, tensors_);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    fail("gguf", "{}: close failed: {}", tmp, std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("gguf", "{}: rename to {} failed: {}", tmp, path, std::strerror(errno));
  }
}

std::vector<std::string> Writer::write_split(const std::string& prefix, size_t max_tensors) const {
  if (max_tensors == 0) fail("gguf", "writer: a split needs at least one tensor per part");
  const size_t n_parts = std::max<size_t>(1, (tensors_.size() + max_tensors - 1) / max_tensors);
  if (n_parts > 99999) fail("gguf", "writer: {} parts; split names have room for 99999", n_parts);
  std::vector<std::string> paths;
  for (size_t k = 0; k < n_parts; ++k) {
    Writer part;
    for (const Kv& kv : kvs_) {
      // Every part keeps the alignment its offsets assume; other metadata lives in the first.
      if (kv.key.rfind("split.", 0) != 0 && (k == 0 || kv.key == "general.alignment")) part.kvs_.push_back(kv);
    }
    part.set_value("split.no", scalar(ValueType::U16, uint64_t{k}));
    part.set_value("split.count", scalar(ValueType::U16, uint64_t{n_parts}));
    part.set_i32("split.tensors.count", static_cast<int32_t>(tensors_.size()));
    const size_t begin = k * max_tensors, end = std::min(tensors_.size(), begin + max_tensors);
    part.tensors_.assign(tensors_.begin() + static_cast<ptrdiff_t>(begin),
                         tensors_.begin() + static_cast<ptrdiff_t>(end));
    paths.push_back(split_part_path(prefix, static_cast<int>(k + 1), static_cast<int>(n_parts)));
    part.write(paths.back());
  }
  return paths;
}

}  // namespace weft::gguf
