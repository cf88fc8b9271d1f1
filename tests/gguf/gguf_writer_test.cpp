// Writer -> reader round trips, plus the writer's bytes checked against a hand-assembled file
// (an independent reference for the layout, so the two halves cannot agree on a shared mistake).
#include "gguf/gguf_writer.h"
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

namespace weft::gguf {
namespace {

Value scalar(ValueType t, decltype(Value::v) v) {
  Value out;
  out.type = t;
  out.v = std::move(v);
  return out;
}

Value array(ValueType elem, std::vector<Value> xs) {
  Value out = scalar(ValueType::Array, std::make_shared<Array>(std::move(xs)));
  out.elem_type = elem;
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// The File points into the buffer, so the caller keeps the bytes alive; a temporary would dangle.
std::unique_ptr<File> reparse(const std::vector<uint8_t>& b) { return File::parse(b.data(), b.size(), "roundtrip"); }
std::unique_ptr<File> reparse(std::vector<uint8_t>&&) = delete;

TEST(GgufWriter, BytesMatchHandAssembledFile) {
  Writer w;
  w.set_u32("a", 7);
  const float data[2] = {1.0f, 2.0f};
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), data, 8);
  w.add_tensor("t", DType::F32, {2}, bytes);

  std::vector<uint8_t> want;
  auto put = [&](const void* p, size_t n) { want.insert(want.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
  auto u32 = [&](uint32_t v) { put(&v, 4); };
  auto u64 = [&](uint64_t v) { put(&v, 8); };
  put("GGUF", 4), u32(3), u64(1), u64(1);               // magic, version, n_tensors, n_kv
  u64(1), put("a", 1), u32(4), u32(7);                  // "a": u32 7
  u64(1), put("t", 1), u32(1), u64(2), u32(0), u64(0);  // "t": 1 dim [2], f32, offset 0
  ASSERT_EQ(want.size(), 74u);
  want.resize(96, 0);  // pad to 32
  put(data, 8);
  want.resize(128, 0);  // the last tensor is padded too, as ggml does
  EXPECT_EQ(w.to_bytes(), want);
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  Writer w;
  w.set_value("u8", scalar(ValueType::U8, uint64_t{255}));
  w.set_value("i8", scalar(ValueType::I8, int64_t{-128}));
  w.set_value("u16", scalar(ValueType::U16, uint64_t{65535}));
  w.set_value("i16", scalar(ValueType::I16, int64_t{-32768}));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_f32("f32", 0.1f);
  w.set_bool("bool", true);
  w.set_string("string", std::string("nul\0in\nside \xe2\x96\x81", 14));
  w.set_u64("u64", 0xfedcba9876543210ull);
  w.set_value("i64", scalar(ValueType::I64, int64_t{-0x123456789abcdef}));
  w.set_value("f64", scalar(ValueType::F64, 1e300));
  w.set_string_array("strings", {"", "a", "longer string"});
  w.set_f32_array("floats", {-1.5f, 0.0f, 3.25f});
  w.set_i32_array("ints", {});
  w.set_value("bools", array(ValueType::Bool, {scalar(ValueType::Bool, false), scalar(ValueType::Bool, true)}));
  w.set_value("nested", array(ValueType::Array, {array(ValueType::U16, {scalar(ValueType::U16, uint64_t{3})}),
                                                 array(ValueType::String, {})}));

  const auto bytes = w.to_bytes();
  auto f = reparse(bytes);
  EXPECT_EQ(f->version(), 3u);
  const std::vector<std::string> order = {"u8",  "i8",  "u16", "i16",     "u32",    "i32",  "f32",   "bool",  "string",
                                          "u64", "i64", "f64", "strings", "floats", "ints", "bools", "nested"};
  EXPECT_EQ(f->key_order(), order);
  const std::vector<ValueType> types = {ValueType::U8,     ValueType::I8,  ValueType::U16, ValueType::I16,
                                        ValueType::U32,    ValueType::I32, ValueType::F32, ValueType::Bool,
                                        ValueType::String, ValueType::U64, ValueType::I64, ValueType::F64};
  for (size_t i = 0; i < types.size(); ++i) EXPECT_EQ(f->find(order[i])->type, types[i]) << order[i];

  EXPECT_EQ(f->get_int("u8"), 255);
  EXPECT_EQ(f->get_int("i8"), -128);
  EXPECT_EQ(f->get_int("u16"), 65535);
  EXPECT_EQ(f->get_int("i16"), -32768);
  EXPECT_EQ(f->get_int("u32"), 4000000000);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(*f->get_float_opt("f32"), static_cast<double>(0.1f));  // f32 precision kept, not rounded further
  EXPECT_EQ(f->get_bool_opt("bool"), true);
  EXPECT_EQ(f->get_string("string"), std::string("nul\0in\nside \xe2\x96\x81", 14));
  EXPECT_EQ(f->find("u64")->as_u64("u64"), 0xfedcba9876543210ull);
  EXPECT_EQ(f->get_int("i64"), -0x123456789abcdef);
  EXPECT_EQ(*f->get_float_opt("f64"), 1e300);
  EXPECT_EQ(f->get_string_array("strings"), (std::vector<std::string>{"", "a", "longer string"}));
  EXPECT_EQ(f->get_float_array("floats"), (std::vector<float>{-1.5f, 0.0f, 3.25f}));
  EXPECT_TRUE(f->get_int_array("ints").empty());
  EXPECT_EQ(f->find("ints")->elem_type, ValueType::I32);
  const Array& bools = f->find("bools")->as_array("bools");
  ASSERT_EQ(bools.size(), 2u);
  EXPECT_FALSE(bools[0].as_bool("bools"));
  EXPECT_TRUE(bools[1].as_bool("bools"));
  const Array& nested = f->find("nested")->as_array("nested");
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[0].elem_type, ValueType::U16);
  EXPECT_EQ(nested[0].as_array("nested")[0].as_u64("nested"), 3u);
  EXPECT_EQ(nested[1].elem_type, ValueType::String);
  EXPECT_TRUE(nested[1].as_array("nested").empty());

  // Copying every value through set_value reproduces the same bytes.
  Writer copy;
  for (const auto& k : f->key_order()) copy.set_value(k, *f->find(k));
  EXPECT_EQ(copy.to_bytes(), bytes);
}

TEST(GgufWriter, TensorsOfSeveralTypesRoundTrip) {
  struct Case {
    const char* name;
    DType type;
    std::vector<int64_t> shape;
    size_t n_bytes;  // from the block layouts in ggml-common.h, written out by hand
  };
  const std::vector<Case> cases = {
      {"f32", DType::F32, {3, 5}, 60},          {"f16", DType::F16, {7}, 14},
      {"bf16", DType::BF16, {4, 2, 3}, 48},     {"q4_0", DType::Q4_0, {64, 3}, 2 * 18 * 3},
      {"q8_0", DType::Q8_0, {32, 1, 1, 2}, 68}, {"q4_k", DType::Q4_K, {256, 2}, 288},
      {"q6_k", DType::Q6_K, {512}, 420},        {"empty", DType::F32, {0, 4}, 0},
  };
  Writer w;
  std::vector<std::vector<uint8_t>> datas;
  for (size_t i = 0; i < cases.size(); ++i) {
    datas.push_back(random_bytes(cases[i].n_bytes, static_cast<uint32_t>(i + 1)));
    w.add_tensor(cases[i].name, cases[i].type, cases[i].shape, datas.back());
  }
  const auto bytes = w.to_bytes();
  auto f = reparse(bytes);
  ASSERT_EQ(f->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.shape, cases[i].shape);
    EXPECT_EQ(t.n_bytes, cases[i].n_bytes);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), datas[i]) << t.name;
  }
  EXPECT_EQ(f->tensor("q4_0").n_elements(), 192);
}

TEST(GgufWriter, LazyTensorsStreamToDisk) {
  // 5 MiB + 3 bytes of f16: bigger than the 4 MiB stream buffer and not a multiple of it.
  const int64_t n = (int64_t{5} << 20) / 2 + 3;
  auto pattern = [](size_t i) { return static_cast<uint8_t>(i * 31 + (i >> 13)); };
  int calls = 0;
  Writer w;
  w.set_string("general.architecture", "test");
  w.add_tensor("small", DType::F32, {1}, std::vector<uint8_t>{1, 2, 3, 4});
  w.add_tensor("big", DType::F16, {n}, [&](uint8_t* dst, size_t n_bytes) {
    ++calls;
    ASSERT_EQ(n_bytes, static_cast<size_t>(n) * 2);
    for (size_t i = 0; i < n_bytes; ++i) dst[i] = pattern(i);
  });
  const auto dir = std::filesystem::temp_directory_path() / ("weft_gguf_writer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "lazy.gguf").string();
  w.write(path);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  auto f = File::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(f->file_size() % 32, 0u);
  const TensorInfo& big = f->tensor("big");
  ASSERT_EQ(big.n_bytes, static_cast<uint64_t>(n) * 2);
  size_t mismatches = 0;
  for (size_t i = 0; i < big.n_bytes; ++i) mismatches += big.data[i] != pattern(i);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(std::memcmp(f->tensor("small").data, "\x01\x02\x03\x04", 4), 0);
  // write() and to_bytes() share the layout code; the bytes on disk must be exactly the same.
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(on_disk == w.to_bytes());
  std::filesystem::remove_all(dir);
}

TEST(GgufWriter, SetReplacesInPlaceAndAlignmentIsHonoured) {
  Writer w;
  w.set_u32("x", 1);
  w.set_string("y", "s");
  w.set_u32("x", 2);
  w.set_u32("general.alignment", 64);
  w.add_tensor("a", DType::F32, {3}, std::vector<uint8_t>(12, 1));
  w.add_tensor("b", DType::F32, {3}, std::vector<uint8_t>(12, 2));
  const auto bytes = w.to_bytes();
  auto f = reparse(bytes);
  EXPECT_EQ(f->key_order(), (std::vector<std::string>{"x", "y", "general.alignment"}));
  EXPECT_EQ(f->get_int("x"), 2);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensor("b").offset, 64u);
  EXPECT_EQ(bytes.size() % 64, 0u);

  w.set_u32("general.alignment", 48);
  EXPECT_ERROR(w.to_bytes(), "general.alignment must be a non-zero power of two");
}

TEST(GgufWriter, RejectsWhatTheReaderWouldReject) {
  Writer w;
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {4}, std::vector<uint8_t>(15)),
               "has 15 bytes of data, its shape needs 16");  // wrong data size
  EXPECT_ERROR(w.add_tensor("t", DType::Q4_0, {16}, std::vector<uint8_t>(9)),
               "row length 16 is not a multiple");  // half a block
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), "has 5 dims (must be 1..4)");
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {}, std::vector<uint8_t>()), "has 0 dims (must be 1..4)");
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {-4}, std::vector<uint8_t>()), "has bad dim -4");
  EXPECT_ERROR(w.add_tensor("", DType::F32, {1}, std::vector<uint8_t>(4)), "writer: empty tensor name");
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {1}, Writer::Fill{}), "has an empty fill callback");
  w.add_tensor("t", DType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_ERROR(w.add_tensor("t", DType::F32, {1}, std::vector<uint8_t>(4)), "duplicate tensor name 't'");
  EXPECT_ERROR(w.set_u32("", 1), "writer: bad key length 0");

  auto serialize_one = [](const Value& v) {
    Writer one;
    one.set_value("k", v);
    return one.to_bytes();
  };
  EXPECT_ERROR(serialize_one(scalar(ValueType::U8, uint64_t{256})), "value 256 does not fit in");
  EXPECT_ERROR(serialize_one(scalar(ValueType::I16, int64_t{40000})), "value 40000 does not fit in");
  EXPECT_ERROR(serialize_one(scalar(ValueType::U32, std::string("x"))), "holds a value of another kind");
  EXPECT_ERROR(serialize_one(array(ValueType::U8, {scalar(ValueType::I8, int64_t{1})})), "key 'k' is an array of");
  Value deep = scalar(ValueType::U8, uint64_t{1});
  for (int d = 0; d <= kMaxArrayDepth; ++d) deep = array(deep.type, {deep});
  EXPECT_ERROR(serialize_one(deep), "nests arrays deeper than");
  EXPECT_NO_THROW(serialize_one(deep.as_array("k")[0]));
}

TEST(GgufWriter, FailedWriteLeavesNoFile) {
  Writer w;
  w.add_tensor("t", DType::F32, {1}, [](uint8_t*, size_t) { throw Error("test", "generator failed"); });
  const auto path =
      (std::filesystem::temp_directory_path() / ("weft_gguf_fail_" + std::to_string(::getpid()))).string();
  EXPECT_ERROR(w.write(path), "generator failed");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_ERROR(w.write("/nonexistent-dir/x.gguf"), "cannot create");
}

}  // namespace
}  // namespace weft::gguf

namespace weft::gguf {
namespace {

// A caller that places tensor data itself (a worker receiving weights) gets the same file.
TEST(GgufWriter, LayoutPlacesDataWhereToBytesDoes) {
  Writer w;
  w.set_string("general.name", "layout");
  const auto a = random_bytes(row_bytes(DType::Q4_0, 64) * 3, 1), b = random_bytes(4 * 5, 2);
  w.add_tensor("a", DType::Q4_0, {64, 3}, a);
  w.add_tensor("b", DType::F32, {5}, b);
  const std::vector<uint8_t> ref = w.to_bytes();
  const Writer::Layout l = w.layout();
  ASSERT_EQ(l.size, ref.size());
  ASSERT_EQ(l.offsets.size(), 2u);
  std::vector<uint8_t> placed(l.size, 0);
  std::copy(l.head.begin(), l.head.end(), placed.begin());
  std::copy(a.begin(), a.end(), placed.begin() + l.offsets[0]);
  std::copy(b.begin(), b.end(), placed.begin() + l.offsets[1]);
  EXPECT_EQ(placed, ref);
  EXPECT_GT(l.offsets[1], l.offsets[0] + a.size() - 1);
}

}  // namespace
}  // namespace weft::gguf
