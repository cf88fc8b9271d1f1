// GGUF v2/v3 reader. Layout (all little-endian), from ggml's docs/gguf.md:
//   "GGUF" u32 version  u64 n_tensors  u64 n_kv
//   n_kv x { string key, u32 value_type, value }
//   n_tensors x { string name, u32 n_dims, i64 dims[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment, then the data section (offsets are relative to its start).
// A string is u64 length + bytes; an array is u32 elem_type + u64 count + elements.
// Every read is bounds-checked and every size computed with overflow checks, so any byte
// sequence gives either a valid File or weft::Error("gguf", "<origin>: ..."), never UB.
#include "gguf/gguf_reader.h"

#include "core/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

namespace weft::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; weft reads it natively");

namespace {

constexpr uint32_t kNumValueTypes = 13;
constexpr uint64_t kMaxNameBytes = 65535;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// A kv pair takes at least key length (8) + type (4) + a 1-byte value; a tensor info at least
// name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8). Counts beyond what the
// bytes left could hold are rejected before anything is reserved.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// An array element is a Value (~56 bytes) in memory; this caps one array at a few GiB even for a
// huge file. The largest real arrays (vocabularies, merges) have ~262k entries.
constexpr uint64_t kMaxArrayCount = uint64_t{1} << 26;

// Smallest encoding of one value of type t (a string is its length, an array its header).
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::String: return 8;
    case ValueType::Array: return 4 + 8;
  }
  return 1;
}

// Bounds-checked little-endian reader over the whole file; errors name the origin (path).
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& origin) : data_(data), size_(size), origin_(origin) {}

  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail("gguf", "{}: {}", origin_, fmt::format(f, std::forward<Args>(args)...));
  }

  void need(uint64_t n, std::string_view what) const {
    if (n > left()) bad("truncated at byte {} reading {} (need {} bytes, {} left)", pos_, what, n, left());
  }

  // memcpy, not a cast: fields are not aligned in the file.
  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(std::string_view what, uint64_t max_bytes) {
    const auto n = read<uint64_t>(what);
    if (n > max_bytes) bad("{} is {} bytes long (at most {} allowed)", what, n, max_bytes);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& origin_;
};

Value make(ValueType t, decltype(Value::v) v) {
  Value out;
  out.type = t;
  out.v = std::move(v);
  return out;
}

ValueType read_value_type(Cursor& c, const std::string& key) {
  const auto id = c.read<uint32_t>("value type");
  if (id >= kNumValueTypes) c.bad("key '{}' has unknown value type {}", key, id);
  return static_cast<ValueType>(id);
}

// depth: how many arrays enclose this value.
Value read_value(Cursor& c, ValueType t, const std::string& key, int depth) {
  switch (t) {
    case ValueType::U8: return make(t, uint64_t{c.read<uint8_t>(key)});
    case ValueType::I8: return make(t, int64_t{c.read<int8_t>(key)});
    case ValueType::U16: return make(t, uint64_t{c.read<uint16_t>(key)});
    case ValueType::I16: return make(t, int64_t{c.read<int16_t>(key)});
    case ValueType::U32: return make(t, uint64_t{c.read<uint32_t>(key)});
    case ValueType::I32: return make(t, int64_t{c.read<int32_t>(key)});
    case ValueType::U64: return make(t, c.read<uint64_t>(key));
    case ValueType::I64: return make(t, c.read<int64_t>(key));
    case ValueType::F32: return make(t, double{c.read<float>(key)});
    case ValueType::F64: return make(t, c.read<double>(key));
    case ValueType::Bool: {
      const auto b = c.read<uint8_t>(key);
      if (b > 1) c.bad("key '{}' has bool byte {} (must be 0 or 1)", key, b);
      return make(t, b == 1);
    }
    case ValueType::String: return make(t, c.read_string(key, std::numeric_limits<uint64_t>::max()));
    case ValueType::Array: {
      const ValueType elem = read_value_type(c, key);
      if (elem == ValueType::Array && depth + 2 > kMaxArrayDepth)
        c.bad("key '{}' nests arrays deeper than {}", key, kMaxArrayDepth);
      const auto count = c.read<uint64_t>(key);
      const uint64_t min_bytes = min_value_bytes(elem);
      if (count > kMaxArrayCount || count > c.left() / min_bytes)
        c.bad("key '{}' is an array of {} {} (needs at least {} bytes per entry, {} bytes left; at most {} entries)",
              key, count, value_type_name(elem), min_bytes, c.left(), kMaxArrayCount);
      auto arr = std::make_shared<Array>();
      arr->reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) arr->push_back(read_value(c, elem, key, depth + 1));
      Value out = make(t, std::move(arr));
      out.elem_type = elem;
      return out;
    }
  }
  c.bad("key '{}' has unknown value type {}", key, static_cast<uint32_t>(t));
}

uint64_t checked_mul(const Cursor& c, uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) c.bad("{} overflows ({} * {})", what, a, b);
  return r;
}

uint64_t checked_add(const Cursor& c, uint64_t a, uint64_t b, std::string_view what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) c.bad("{} overflows ({} + {})", what, a, b);
  return r;
}

TensorInfo read_tensor_info(Cursor& c) {
  TensorInfo t;
  t.name = c.read_string("tensor name", kMaxNameBytes);
  if (t.name.empty()) c.bad("tensor at byte {} has an empty name", c.pos());
  const auto n_dims = c.read<uint32_t>("tensor n_dims");
  if (n_dims == 0 || n_dims > kMaxDims) c.bad("tensor '{}' has n_dims {} (must be 1..{})", t.name, n_dims, kMaxDims);
  int64_t n_elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    const auto d = c.read<int64_t>("tensor dim");
    if (d < 0) c.bad("tensor '{}' has negative dim {} = {}", t.name, i, d);
    if (__builtin_mul_overflow(n_elements, d, &n_elements))
      c.bad("tensor '{}' element count overflows at dim {} = {}", t.name, i, d);
    t.shape.push_back(d);
  }
  const auto type_id = c.read<uint32_t>("tensor type");
  const auto tr = dtype_traits(type_id);
  if (!tr) c.bad("tensor '{}' has unknown ggml type id {}", t.name, type_id);
  if (!tr->supported) c.bad("tensor '{}' has type {} (id {}), which weft does not support", t.name, tr->name, type_id);
  t.type = static_cast<DType>(type_id);
  const int64_t ne0 = t.shape[0];
  if (ne0 % tr->block_size != 0)
    c.bad("tensor '{}' row length {} is not a multiple of the {} block size {}", t.name, ne0, tr->name, tr->block_size);
  if (ne0 > 0) {
    const uint64_t row = checked_mul(c, static_cast<uint64_t>(ne0 / tr->block_size), tr->block_bytes,
                                     "tensor '" + t.name + "' row bytes");
    t.n_bytes = checked_mul(c, row, static_cast<uint64_t>(n_elements / ne0), "tensor '" + t.name + "' byte size");
  }
  t.offset = c.read<uint64_t>("tensor offset");
  return t;
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

void File::parse_all(const uint8_t* data, size_t size) {
  Cursor c(data, size, path_);
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) {
    uint8_t m[4] = {0, 0, 0, 0};
    std::memcpy(m, data, std::min<size_t>(size, 4));
    c.bad("bad magic {:02x} {:02x} {:02x} {:02x} (expected \"GGUF\"; {} bytes)", m[0], m[1], m[2], m[3], size);
  }
  c.read<uint32_t>("magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) c.bad("GGUF v1 is not supported (it used 32-bit counts); re-convert the model to v3");
  if (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3) c.bad("big-endian GGUF is not supported");
  if (version_ != 2 && version_ != 3) c.bad("unsupported GGUF version {} (supported: 2, 3)", version_);

  const auto n_tensors = c.read<uint64_t>("tensor count");
  const auto n_kv = c.read<uint64_t>("kv count");
  if (n_kv > c.left() / kMinKvBytes) c.bad("kv count {} is absurd for a file of {} bytes", n_kv, size);
  if (n_tensors > c.left() / kMinTensorInfoBytes)
    c.bad("tensor count {} is absurd for a file of {} bytes", n_tensors, size);
  if (n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > c.left())
    c.bad("{} kv pairs and {} tensors cannot fit in a file of {} bytes", n_kv, n_tensors, size);

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("key", kMaxKeyBytes);
    if (key.empty()) c.bad("kv pair {} has an empty key", i);
    if (kv_.count(key)) c.bad("duplicate key '{}'", key);
    const ValueType t = read_value_type(c, key);
    kv_.emplace(key, read_value(c, t, key, 0));
    key_order_.push_back(std::move(key));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U8 && a->type != ValueType::U16 && a->type != ValueType::U32 && a->type != ValueType::U64)
      c.bad("general.alignment has type {} (must be an unsigned integer)", value_type_name(a->type));
    alignment_ = std::get<uint64_t>(a->v);
    if (!std::has_single_bit(alignment_)) c.bad("general.alignment {} is not a non-zero power of two", alignment_);
  }

  std::set<std::string> names;
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(c);
    if (!names.insert(t.name).second) c.bad("duplicate tensor name '{}'", t.name);
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t pos = c.pos();
  data_offset_ = checked_add(c, pos, alignment_ - 1, "data section offset") / alignment_ * alignment_;
  for (auto& t : tensors_) {
    if (t.offset % alignment_ != 0)
      c.bad("tensor '{}' offset {} is not a multiple of the alignment {}", t.name, t.offset, alignment_);
    const uint64_t begin = checked_add(c, data_offset_, t.offset, "tensor '" + t.name + "' offset");
    const uint64_t end = checked_add(c, begin, t.n_bytes, "tensor '" + t.name + "' end");
    if (end > size)
      c.bad("tensor '{}' data [{}, {}) ({} bytes) lies outside the file ({} bytes)", t.name, begin, end, t.n_bytes,
            size);
    t.data = data + begin;
  }

  // Ranges must not overlap (empty tensors occupy nothing): sort by offset, compare neighbours.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors_)
    if (t.n_bytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& a = *by_offset[i - 1];
    const TensorInfo& b = *by_offset[i];
    if (b.offset < a.offset + a.n_bytes)
      c.bad("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", a.name, a.offset, a.offset + a.n_bytes, b.name, b.offset,
            b.offset + b.n_bytes);
  }
}

std::unique_ptr<File> File::open(const std::string& path) {
  std::unique_ptr<File> f = open_one(path);
  f->open_split_parts();
  return f;
}

std::unique_ptr<File> File::open_one(const std::string& path) {
  // O_NONBLOCK: a FIFO given as the model would otherwise wait for a writer forever (a regular
  // file, the only kind accepted below, ignores it).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("gguf", "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("gguf", "{}: not a regular file", path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail("gguf", "{}: file is empty", path);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) fail("gguf", "{}: mmap of {} bytes failed: {}", path, size, std::strerror(map_errno));

  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->map_ = map;
  f->size_ = size;
  f->part_paths_ = {path};
  f->parse_all(static_cast<const uint8_t*>(map), size);  // on throw, ~File unmaps
  return f;
}

std::unique_ptr<File> File::parse(const uint8_t* data, size_t size, std::string origin) {
  WEFT_ASSERT(data != nullptr || size == 0);
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(origin);
  f->size_ = size;
  static const uint8_t kEmpty = 0;
  f->parse_all(data ? data : &kEmpty, size);
  return f;
}

File::~File() {
  if (map_) ::munmap(map_, size_);
}

void File::release(const void* p, size_t n) const {
  const auto base = reinterpret_cast<uintptr_t>(map_), at = reinterpret_cast<uintptr_t>(p);
  if (!map_ || at < base || at + n > base + size_) {
    for (const auto& part : other_parts_) part->release(p, n);  // a split model's other parts
    return;
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = at / page * page, end = std::min((at + n + page - 1) / page * page, base + size_);
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void File::release_data() const {
  for (const auto& part : other_parts_) part->release_data();
  if (map_ && data_offset_ < size_) release(static_cast<const uint8_t*>(map_) + data_offset_, size_ - data_offset_);
}

// ---- typed access ----------------------------------------------------------------------------

namespace {

[[noreturn]] void wrong_kind(const Value& v, const std::string& key, std::string_view want) {
  fail("gguf", "key '{}' has type {}, not {}", key, value_type_name(v.type), want);
}

}  // namespace

uint64_t Value::as_u64(const std::string& key) const {
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (*i < 0) fail("gguf", "key '{}' is {}, expected a non-negative integer", key, *i);
    return static_cast<uint64_t>(*i);
  }
  wrong_kind(*this, key, "an integer");
}

int64_t Value::as_i64(const std::string& key) const {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("gguf", "key '{}' is {}, too large for i64", key, *u);
    return static_cast<int64_t>(*u);
  }
  wrong_kind(*this, key, "an integer");
}

// Integers widen to double too: a hyperparameter written as u32 is still a number.
double Value::as_f64(const std::string& key) const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  wrong_kind(*this, key, "a number");
}

bool Value::as_bool(const std::string& key) const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  wrong_kind(*this, key, "bool");
}

const std::string& Value::as_string(const std::string& key) const {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  wrong_kind(*this, key, "string");
}

const Array& Value::as_array(const std::string& key) const {
  if (const auto* a = std::get_if<std::shared_ptr<Array>>(&v); a && *a) return **a;
  wrong_kind(*this, key, "array");
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;  // the reader rejected overflow
  return n;
}

const Value* File::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
const Value& must_find(const File& f, const std::string& key) {
  const Value* v = f.find(key);
  if (!v) fail("gguf", "{}: missing key '{}'", f.path(), key);
  return *v;
}
}  // namespace

std::string File::get_string(const std::string& key) const { return must_find(*this, key).as_string(key); }
int64_t File::get_int(const std::string& key) const { return must_find(*this, key).as_i64(key); }

std::optional<std::string> File::get_string_opt(const std::string& key) const {
  const Value* v = find(key);
  return v ? std::optional(v->as_string(key)) : std::nullopt;
}

std::optional<int64_t> File::get_int_opt(const std::string& key) const {
  const Value* v = find(key);
  return v ? std::optional(v->as_i64(key)) : std::nullopt;
}

std::optional<double> File::get_float_opt(const std::string& key) const {
  const Value* v = find(key);
  return v ? std::optional(v->as_f64(key)) : std::nullopt;
}

std::optional<bool> File::get_bool_opt(const std::string& key) const {
  const Value* v = find(key);
  return v ? std::optional(v->as_bool(key)) : std::nullopt;
}

std::vector<std::string> File::get_string_array(const std::string& key) const {
  std::vector<std::string> out;
  for (const auto& e : must_find(*this, key).as_array(key)) out.push_back(e.as_string(key));
  return out;
}

std::vector<float> File::get_float_array(const std::string& key) const {
  std::vector<float> out;
  for (const auto& e : must_find(*this, key).as_array(key)) out.push_back(static_cast<float>(e.as_f64(key)));
  return out;
}

std::vector<int64_t> File::get_int_array(const std::string& key) const {
  std::vector<int64_t> out;
  for (const auto& e : must_find(*this, key).as_array(key)) out.push_back(e.as_i64(key));
  return out;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& File::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) fail("gguf", "{}: missing tensor '{}'", path_, name);
  return *t;
}

}  // namespace weft::gguf
