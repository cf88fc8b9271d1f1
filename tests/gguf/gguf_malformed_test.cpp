// Hostile inputs: every malformed file must throw weft::Error naming the problem, never crash,
// never allocate what the file merely claims. Files are assembled byte by byte here (not with
// the Writer) so each field can be set to a bad value on purpose.
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace weft::gguf {
namespace {

// Little-endian byte assembler for hand-made GGUF files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  Bytes& pad_to(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

struct RawTensor {
  std::string name;
  std::vector<int64_t> dims;
  uint32_t type = 0;  // f32
  uint64_t offset = 0;
  uint32_t n_dims = 0;  // 0: dims.size()
};

// Header with the given counts; kvs appended by the caller's bytes; tensor infos; padding; data.
std::vector<uint8_t> build(const std::vector<RawTensor>& tensors, const Bytes& kvs, uint64_t n_kv, size_t data_bytes,
                           size_t alignment = 32, uint32_t version = 3) {
  Bytes f;
  f.b = {'G', 'G', 'U', 'F'};
  f.put<uint32_t>(version).put<uint64_t>(tensors.size()).put<uint64_t>(n_kv);
  f.b.insert(f.b.end(), kvs.b.begin(), kvs.b.end());
  for (const auto& t : tensors) {
    f.str(t.name).put<uint32_t>(t.n_dims ? t.n_dims : static_cast<uint32_t>(t.dims.size()));
    for (auto d : t.dims) f.put<int64_t>(d);
    f.put<uint32_t>(t.type).put<uint64_t>(t.offset);
  }
  f.pad_to(alignment).zeros(data_bytes);
  return f.b;
}

std::vector<uint8_t> two_tensors(uint64_t second_offset = 64, size_t data_bytes = 128) {
  return build({{"a", {8, 2}, 0, 0}, {"b", {16}, 0, second_offset}}, Bytes{}, 0, data_bytes);
}

std::unique_ptr<File> parse(const std::vector<uint8_t>& b) { return File::parse(b.data(), b.size(), "test.gguf"); }

// Parsing must throw weft::Error whose message contains every fragment (the key, the bad value).
void expect_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& fragments) {
  try {
    parse(bytes);
    ADD_FAILURE() << "parsed without error; expected: " << fragments.front();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.origin(), "gguf");
    EXPECT_NE(msg.find("test.gguf"), std::string::npos) << msg;  // names the file
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
  }
}

TEST(GgufMalformed, HandBuiltBaselineParses) {
  // The baseline the mutations below start from must itself be valid, or they prove nothing.
  auto f = parse(two_tensors());
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
  EXPECT_EQ(f->tensors()[1].n_bytes, 64u);
}

TEST(GgufMalformed, BadMagicAndVersions) {
  auto b = two_tensors();
  b[0] = 'X';
  expect_error(b, {"bad magic", "58"});
  expect_error({}, {"bad magic", "0 bytes"});
  expect_error({'G', 'G'}, {"bad magic"});
  expect_error(build({}, Bytes{}, 0, 0, 32, 1), {"v1"});
  expect_error(build({}, Bytes{}, 0, 0, 32, 4), {"version 4"});
  expect_error(build({}, Bytes{}, 0, 0, 32, 0x03000000u), {"big-endian"});
  EXPECT_NO_THROW(parse(build({}, Bytes{}, 0, 0, 32, 2)));  // v2 has the same layout as v3
}

TEST(GgufMalformed, AbsurdCounts) {
  auto b = build({}, Bytes{}, 0, 0);
  std::vector<uint8_t> t = b, k = b;
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(t.data() + 8, &huge, 8);
  std::memcpy(k.data() + 16, &huge, 8);
  expect_error(t, {"tensor count", "1152921504606846976"});
  expect_error(k, {"kv count", "1152921504606846976"});
  // Plausible alone, impossible together: 1 kv + 1 tensor claimed in a file with 40 bytes left.
  auto both = build({}, Bytes{}.zeros(40), 1, 0);
  both[8] = 1;  // tensor count
  expect_error(both, {"1 kv pairs and 1 tensors cannot fit"});
}

TEST(GgufMalformed, HugeStringAndArrayLengths) {
  Bytes key_len;
  key_len.put<uint64_t>(uint64_t{1} << 62).zeros(16);
  expect_error(build({}, key_len, 1, 0), {"key", "4611686018427387904"});

  Bytes str_len;
  str_len.str("general.name").put<uint32_t>(8).put<uint64_t>(1000000).zeros(16);
  expect_error(build({}, str_len, 1, 0), {"general.name", "need 1000000 bytes"});

  Bytes arr;
  arr.str("tokens").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 40).zeros(16);
  expect_error(build({}, arr, 1, 0), {"tokens", "1099511627776"});

  Bytes arr_str;  // strings take at least 8 bytes each: 6 of them cannot fit in the 42 bytes left
  arr_str.str("merges").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(6).zeros(16);
  expect_error(build({}, arr_str, 1, 0), {"merges", "array of 6 string", "42 bytes left"});
}

TEST(GgufMalformed, ValueTypesAndNesting) {
  Bytes bad_type;
  bad_type.str("k").put<uint32_t>(13).put<uint32_t>(0);
  expect_error(build({}, bad_type, 1, 0), {"'k'", "unknown value type 13"});

  Bytes bad_elem;
  bad_elem.str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0);
  expect_error(build({}, bad_elem, 1, 0), {"'k'", "77"});

  Bytes bad_bool;
  bad_bool.str("flag").put<uint32_t>(7).put<uint8_t>(2);
  expect_error(build({}, bad_bool, 1, 0), {"flag", "bool byte 2"});

  // Arrays of arrays are fine up to kMaxArrayDepth, rejected beyond.
  auto nested = [](int depth) {
    Bytes b;
    b.str("nest").put<uint32_t>(9);
    for (int d = 1; d < depth; ++d) b.put<uint32_t>(9).put<uint64_t>(1);
    b.put<uint32_t>(0).put<uint64_t>(1).put<uint8_t>(42);
    return build({}, b, 1, 0);
  };
  auto ok = parse(nested(kMaxArrayDepth));
  const Value* v = ok->find("nest");
  for (int d = 0; d < kMaxArrayDepth; ++d) v = &v->as_array("nest")[0];
  EXPECT_EQ(v->as_u64("nest"), 42u);
  expect_error(nested(kMaxArrayDepth + 1), {"nest", "deeper"});
}

TEST(GgufMalformed, DuplicateKeysAndNames) {
  Bytes kvs;
  kvs.kv_u32("general.x", 1).kv_u32("general.x", 2);
  expect_error(build({}, kvs, 2, 0), {"duplicate key", "general.x"});
  expect_error(build({{"w", {8}, 0, 0}, {"w", {8}, 0, 32}}, Bytes{}, 0, 64), {"duplicate tensor", "'w'"});
  Bytes empty_key;
  empty_key.kv_u32("", 1);
  expect_error(build({}, empty_key, 1, 0), {"empty key"});
}

TEST(GgufMalformed, Dims) {
  RawTensor t{"w", {8, 2}, 0, 0};
  t.n_dims = 5;
  t.dims = {8, 1, 1, 1, 1};
  expect_error(build({t}, Bytes{}, 0, 64), {"'w'", "n_dims 5"});
  t.n_dims = 0;
  t.dims = {};
  expect_error(build({t}, Bytes{}, 0, 64), {"'w'", "n_dims 0"});
  expect_error(build({{"w", {8, -1}, 0, 0}}, Bytes{}, 0, 64), {"'w'", "negative dim 1 = -1"});
  const int64_t big = int64_t{1} << 40;
  expect_error(build({{"w", {big, big}, 0, 0}}, Bytes{}, 0, 64), {"'w'", "overflows"});
  // Element count fits but the byte size does not (q8_0: 34 bytes per 32 elements, f32 4 per 1).
  expect_error(build({{"w", {int64_t{1} << 62}, 0, 0}}, Bytes{}, 0, 64), {"'w'", "overflows"});
}

TEST(GgufMalformed, TensorTypes) {
  expect_error(build({{"w", {8}, 99, 0}}, Bytes{}, 0, 64), {"'w'", "unknown ggml type id 99"});
  expect_error(build({{"w", {8}, 4, 0}}, Bytes{}, 0, 64), {"'w'", "unknown ggml type id 4"});  // removed Q4_2
  expect_error(build({{"w", {32}, 9, 0}}, Bytes{}, 0, 128), {"'w'", "q8_1", "not support"});
  expect_error(build({{"w", {256}, 16, 0}}, Bytes{}, 0, 128), {"'w'", "iq2_xxs", "not support"});
  auto iq = parse(build({{"w", {256, 2}, 23, 0}}, Bytes{}, 0, 512));  // iq4_xs: 136 bytes per 256 values
  EXPECT_EQ(iq->tensors()[0].n_bytes, 272u);
  expect_error(build({{"w", {48}, 2, 0}}, Bytes{}, 0, 64), {"'w'", "row length 48", "32"});
  auto q = parse(build({{"w", {64, 3}, 2, 0}}, Bytes{}, 0, 128));  // q4_0: 2 blocks * 18 bytes * 3 rows
  EXPECT_EQ(q->tensors()[0].n_bytes, 108u);
}

TEST(GgufMalformed, OffsetsAndRanges) {
  expect_error(two_tensors(48), {"'b'", "offset 48", "alignment 32"});
  expect_error(two_tensors(64, 100), {"'b'", "outside the file"});
  expect_error(two_tensors(uint64_t{1} << 62), {"'b'", "outside the file"});
  expect_error(two_tensors(0xffffffffffffffe0ull), {"'b'", "overflows"});
  expect_error(two_tensors(32), {"'a'", "'b'", "overlap"});
  // Order in the file need not follow offset order; only overlap matters.
  auto f = parse(build({{"a", {8}, 0, 32}, {"b", {8}, 0, 0}}, Bytes{}, 0, 64));
  EXPECT_EQ(f->tensor("a").data - f->tensor("b").data, 32);
}

TEST(GgufMalformed, Alignment) {
  auto with_alignment = [](uint32_t value_type, uint64_t value) {
    Bytes kv;
    kv.str("general.alignment").put<uint32_t>(value_type);
    if (value_type == 10)
      kv.put<uint64_t>(value);
    else if (value_type == 8)
      kv.str("32");
    else
      kv.put<uint32_t>(static_cast<uint32_t>(value));
    return build({{"w", {8}, 0, 0}}, kv, 1, 64, 64);
  };
  expect_error(with_alignment(4, 0), {"general.alignment 0"});
  expect_error(with_alignment(4, 48), {"general.alignment 48"});
  expect_error(with_alignment(8, 0), {"general.alignment", "string"});
  expect_error(with_alignment(5, 32), {"general.alignment", "i32"});
  auto f = parse(with_alignment(4, 64));
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(parse(with_alignment(10, 64))->alignment(), 64u);
}

// A small valid file from the Writer, holding a bit of everything, with the last tensor's size a
// multiple of the alignment so there is no trailing padding: then every truncation loses bytes.
std::vector<uint8_t> small_valid_file() {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 1, 1});
  w.add_tensor("tok", DType::F32, {4, 3}, std::vector<uint8_t>(48, 0x11));
  w.add_tensor("q", DType::Q8_0, {32, 1}, std::vector<uint8_t>(34, 0x22));
  w.add_tensor("h", DType::F16, {16, 2}, std::vector<uint8_t>(64, 0x33));
  return w.to_bytes();
}

TEST(GgufMalformed, TruncatedAtEveryOffset) {
  const auto full = small_valid_file();
  auto f = parse(full);
  const auto& last = f->tensors().back();
  ASSERT_EQ(f->data_offset() + last.offset + last.n_bytes, full.size()) << "the file must not end in padding";
  for (size_t n = 0; n < full.size(); ++n) {
    // A fresh buffer of exactly n bytes, so ASan sees any read past the truncation.
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_ERROR(parse(cut), "[gguf] test.gguf: ") << "truncated to " << n << " of " << full.size() << " bytes";
  }
}

TEST(GgufMalformed, RandomByteFlipsOnlyThrowWeftError) {
  const auto base = small_valid_file();
  std::mt19937_64 rng(20240611);
  constexpr int kMutations = 4000;
  // Values that often turn lengths, counts and types into edge cases.
  const uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x20, 0x04, 0x09, 0x10};
  int n_ok = 0, n_error = 0;
  for (int i = 0; i < kMutations; ++i) {
    auto b = base;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_flips; ++k) {
      const size_t pos = rng() % b.size();
      b[pos] = (rng() % 2) ? kInteresting[rng() % sizeof(kInteresting)] : static_cast<uint8_t>(rng());
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());
    try {
      auto f = parse(b);
      for (const auto& t : f->tensors()) {  // a success must still be self-consistent
        ASSERT_GE(t.data, b.data());
        ASSERT_LE(t.data + t.n_bytes, b.data() + b.size());
      }
      ++n_ok;
    } catch (const Error&) {
      ++n_error;
    } catch (const std::exception& e) {
      FAIL() << "mutation " << i << " threw a non-weft exception: " << e.what();
    }
  }
  // Both outcomes must occur, or the loop is not exercising the parser.
  EXPECT_GT(n_ok, 50);
  EXPECT_GT(n_error, 500);
}

}  // namespace
}  // namespace weft::gguf
