#include "gguf/gguf_info.h"

#include "gguf/gguf_writer.h"

#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace weft::gguf {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GgufInfo, SyntheticFile) {
  Writer w;
  w.set_string("general.name", "line1\nline2 \"q\"");
  w.set_u32("n", 7);
  std::vector<int32_t> ids(20);
  for (int i = 0; i < 20; ++i) ids[i] = 100 + i;
  w.set_i32_array("ids", ids);
  w.set_string("long", std::string(300, 'x'));
  w.add_tensor("w", DType::Q8_0, {64, 3}, std::vector<uint8_t>(2 * 34 * 3));
  w.add_tensor("b", DType::F32, {3}, std::vector<uint8_t>(12));
  const auto bytes = w.to_bytes();
  auto f = File::parse(bytes.data(), bytes.size(), "synthetic");

  const std::string brief = describe(*f, false);
  EXPECT_TRUE(contains(brief, "GGUF v3, 4 metadata keys, 2 tensors")) << brief;
  EXPECT_TRUE(contains(brief, R"("line1\nline2 \"q\"")")) << brief;
  EXPECT_TRUE(contains(brief, "i32[20]")) << brief;
  EXPECT_TRUE(contains(brief, "[100, 101, 102, 103, 104, 105, 106, 107, ... (12 more)]")) << brief;
  EXPECT_FALSE(contains(brief, "119")) << brief;
  EXPECT_TRUE(contains(brief, "... (300 bytes)")) << brief;
  EXPECT_TRUE(contains(brief, "q8_0")) << brief;
  EXPECT_TRUE(contains(brief, "[64, 3]")) << brief;
  EXPECT_TRUE(contains(brief, "total: 195 params, 216 bytes")) << brief;
  // Keys in file order.
  EXPECT_LT(brief.find("general.name"), brief.find("ids"));
  EXPECT_LT(brief.find("ids"), brief.find("long"));

  const std::string full = describe(*f, true);
  EXPECT_TRUE(contains(full, "118, 119]")) << full;
  EXPECT_TRUE(contains(full, std::string(300, 'x'))) << full;
  EXPECT_FALSE(contains(full, "more)")) << full;
}

TEST(GgufInfo, Stories260K) {
  const std::string path = WEFT_SHARED_DIR "/models/stories260K.gguf";
  WEFT_NEED_SHARED_FILE(path);
  auto f = File::open(path);
  const std::string s = describe(*f, false);
  EXPECT_TRUE(contains(s, "GGUF v3, 19 metadata keys, 48 tensors, alignment 32")) << s;
  EXPECT_TRUE(contains(s, "string[512]")) << s;
  EXPECT_TRUE(contains(s, R"(["<unk>", "<s>", "</s>", "<0x00>")")) << s;
  EXPECT_TRUE(contains(s, "general.architecture")) << s;
  EXPECT_TRUE(contains(s, "\"llama\"")) << s;
  EXPECT_TRUE(contains(s, "blk.0.ffn_down.weight")) << s;
  EXPECT_TRUE(contains(s, "[172, 64]")) << s;
  EXPECT_TRUE(contains(s, "44,032")) << s;  // 172 * 64 * 4 bytes
  EXPECT_TRUE(contains(s, "total: 292,800 params, 1,171,200 bytes")) << s;
  EXPECT_TRUE(contains(s, "1e-05")) << s;
}

}  // namespace
}  // namespace weft::gguf
