// Split models as llama-gguf-split writes them: the writer's parts read back as the one model they
// were cut from, and every way a set of parts can be wrong is an error naming the part.
#include "core/error.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/expect_error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

namespace weft::gguf {
namespace {

namespace fs = std::filesystem;

// tensors t0.. with distinct bytes, and some metadata.
Writer model(int n_tensors) {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 3);
  for (int i = 0; i < n_tensors; ++i) {
    std::vector<uint8_t> bytes(4 * 6 * (i + 1));
    for (size_t b = 0; b < bytes.size(); ++b) bytes[b] = static_cast<uint8_t>(i * 31 + b);
    w.add_tensor(fmt::format("t{}", i), DType::F32, {6, i + 1}, std::move(bytes));
  }
  return w;
}

Value u16(uint64_t v) {
  Value out;
  out.type = ValueType::U16;
  out.v = v;
  return out;
}

// One part written by hand: split.no / count / tensors.count as given, tensors t<first>..t<last>.
void write_part(const std::string& path, int no, int count, int total, int first, int last) {
  Writer w;
  w.set_value("split.no", u16(no));
  w.set_value("split.count", u16(count));
  w.set_i32("split.tensors.count", total);
  for (int i = first; i <= last; ++i) {
    std::vector<uint8_t> bytes(4 * 6 * (i + 1), static_cast<uint8_t>(i));
    w.add_tensor(fmt::format("t{}", i), DType::F32, {6, i + 1}, std::move(bytes));
  }
  w.write(path);
}

std::string fresh_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "/" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(GgufSplit, PartNamesAreLlamaGgufSplits) {
  EXPECT_EQ(split_part_path("dir/m", 2, 3), "dir/m-00002-of-00003.gguf");
  EXPECT_EQ(split_parts_named_by("dir/m-00001-of-00003.gguf"),
            (std::vector<std::string>{"dir/m-00001-of-00003.gguf", "dir/m-00002-of-00003.gguf",
                                      "dir/m-00003-of-00003.gguf"}));
  EXPECT_TRUE(split_parts_named_by("dir/m-00002-of-00003.gguf").empty());  // not the first part
  EXPECT_TRUE(split_parts_named_by("dir/m-00001-of-00001.gguf").empty());  // one part: not split
  EXPECT_TRUE(split_parts_named_by("dir/m.gguf").empty());
  EXPECT_TRUE(split_parts_named_by("m-0001-of-00003.gguf").empty());
}

TEST(GgufSplit, PartsReadBackAsTheWholeModel) {
  const std::string d = fresh_dir("weft_split_whole");
  const Writer w = model(7);
  w.write(d + "/whole.gguf");
  const std::vector<std::string> parts = w.write_split(d + "/m", 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2], d + "/m-00003-of-00003.gguf");

  const auto whole = File::open(d + "/whole.gguf");
  const auto split = File::open(parts[0]);
  EXPECT_EQ(split->part_paths(), parts);
  EXPECT_EQ(whole->part_paths(), std::vector<std::string>{d + "/whole.gguf"});
  uint64_t bytes = 0;
  for (const auto& p : parts) bytes += fs::file_size(p);
  EXPECT_EQ(split->total_size(), bytes);
  EXPECT_GT(split->total_size(), split->file_size());
  // Metadata from the first part, plus the split keys.
  EXPECT_EQ(split->get_string("general.architecture"), "llama");
  EXPECT_EQ(split->get_int("llama.block_count"), 3);
  EXPECT_EQ(split->get_int("split.count"), 3);
  EXPECT_EQ(split->get_int("split.tensors.count"), 7);
  ASSERT_EQ(split->tensors().size(), whole->tensors().size());
  for (size_t i = 0; i < whole->tensors().size(); ++i) {
    const TensorInfo& a = whole->tensors()[i];
    const TensorInfo& b = split->tensor(a.name);
    EXPECT_EQ(b.part, i / 3) << a.name;
    EXPECT_EQ(b.shape, a.shape);
    ASSERT_EQ(b.n_bytes, a.n_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;  // the right part's mapping
  }
  // A model that fits one part is written as one part, which reads as an ordinary file.
  const std::vector<std::string> one = model(2).write_split(d + "/small", 5);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(File::open(one[0])->part_paths().size(), 1u);
}

TEST(GgufSplit, MalformedSplitsNameThePart) {
  const std::string d = fresh_dir("weft_split_bad");
  const std::string p1 = d + "/m-00001-of-00003.gguf", p2 = d + "/m-00002-of-00003.gguf",
                    p3 = d + "/m-00003-of-00003.gguf";
  auto reset = [&] { model(7).write_split(d + "/m", 3); };

  reset();
  fs::remove(p3);
  EXPECT_ERROR(File::open(p1), fmt::format("part 3 of 3 ({}): {}: cannot open", p3, p3));

  reset();
  write_part(p2, 1, 4, 7, 3, 5);
  EXPECT_ERROR(File::open(p1), fmt::format("part 2 of 3 ({}): its split.count is 4, the first part's 3", p2));

  reset();
  write_part(p2, 2, 3, 7, 3, 5);
  EXPECT_ERROR(File::open(p1), fmt::format("part 2 of 3 ({}): its split.no is 2 (expected 1)", p2));

  reset();
  write_part(p3, 2, 3, 7, 5, 6);  // t5 again: also in part 2
  EXPECT_ERROR(File::open(p1), fmt::format("part 3 of 3 ({}): tensor 't5' is also in an earlier part", p3));

  reset();
  write_part(p3, 2, 3, 7, 6, 6);
  write_part(p2, 1, 3, 7, 3, 4);  // t5 in no part
  EXPECT_ERROR(File::open(p1), "split.tensors.count says 7 tensors, its 3 parts hold 6");

  reset();
  EXPECT_ERROR(File::open(p2), fmt::format("split.no is 1 in a 3-part split model: open its first part, {}", p1));

  reset();
  fs::rename(p1, d + "/renamed.gguf");
  EXPECT_ERROR(File::open(d + "/renamed.gguf"), "not named <prefix>-00001-of-00003.gguf");
}

}  // namespace
}  // namespace weft::gguf
