// The reader on real files produced by llama.cpp's converters; expected values come from
// /work/shared/models/SOURCES.txt and an independent Python dump of the files.
#include "gguf/gguf_reader.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "support/expect_error.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace weft::gguf {
namespace {

const std::string kStories = WEFT_SHARED_DIR "/models/stories260K.gguf";
const std::string kVocabSpm = WEFT_SHARED_DIR "/models/vocab/ggml-vocab-llama-spm.gguf";
const std::string kVocabGpt2 = WEFT_SHARED_DIR "/models/vocab/ggml-vocab-gpt-2.gguf";

TEST(GgufReader, Stories260KMetadata) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = File::open(kStories);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->key_order().size(), 19u);
  EXPECT_EQ(f->key_order().front(), "tokenizer.ggml.tokens");  // file order, not sorted
  EXPECT_EQ(f->key_order().back(), "llama.attention.layer_norm_rms_epsilon");
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 14176u);  // 14152 bytes of header, padded to 32

  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->get_int("llama.context_length"), 2048);
  EXPECT_EQ(f->get_int("tokenizer.ggml.seperator_token_id"), 4294967295);  // u32 -1, kept unsigned
  EXPECT_FLOAT_EQ(static_cast<float>(*f->get_float_opt("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->get_float_opt("llama.rope.freq_base"), std::nullopt);

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 512u);
  const auto types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ((std::vector<int64_t>(types.begin(), types.begin() + 4)), (std::vector<int64_t>{2, 3, 3, 6}));
}

TEST(GgufReader, Stories260KTensors) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = File::open(kStories);
  ASSERT_EQ(f->tensors().size(), 48u);
  struct Want {
    const char* name;
    std::vector<int64_t> shape;
    uint64_t offset;
  };
  const Want wants[] = {
      {"token_embd.weight", {64, 512}, 0},          {"output_norm.weight", {64}, 131072},
      {"output.weight", {64, 512}, 131328},         {"blk.0.attn_q.weight", {64, 64}, 262400},
      {"blk.0.attn_k.weight", {64, 32}, 278784},    {"blk.0.ffn_gate.weight", {64, 172}, 311808},
      {"blk.0.ffn_down.weight", {172, 64}, 355840}, {"blk.4.ffn_norm.weight", {64}, 1170944},
  };
  for (const auto& w : wants) {
    const TensorInfo& t = f->tensor(w.name);
    EXPECT_EQ(t.type, DType::F32) << w.name;
    EXPECT_EQ(t.shape, w.shape) << w.name;
    EXPECT_EQ(t.offset, w.offset) << w.name;
    EXPECT_EQ(t.n_bytes, static_cast<uint64_t>(t.n_elements()) * 4) << w.name;
  }
  int64_t params = 0;
  for (const auto& t : f->tensors()) params += t.n_elements();
  EXPECT_EQ(params, 292800);
  const auto& last = f->tensors().back();
  EXPECT_EQ(f->data_offset() + last.offset + last.n_bytes, f->file_size());

  // Tied weights are stored twice: the two tensors' bytes must match, and the data must not be zeros.
  const TensorInfo& emb = f->tensor("token_embd.weight");
  const TensorInfo& out = f->tensor("output.weight");
  EXPECT_EQ(std::memcmp(emb.data, out.data, emb.n_bytes), 0);
  float first;
  std::memcpy(&first, emb.data, 4);
  EXPECT_NE(first, 0.0f);
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
  EXPECT_ERROR(f->tensor("nope"), "missing tensor 'nope'");
}

TEST(GgufReader, Stories260KRewritesByteForByte) {
  // Our writer reproduces llama.cpp's converter output exactly: same kv types, order, layout.
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = File::open(kStories);
  Writer w;
  for (const auto& k : f->key_order()) w.set_value(k, *f->find(k));
  for (const auto& t : f->tensors())
    w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  const auto bytes = w.to_bytes();
  std::ifstream in(kStories, std::ios::binary);
  const std::vector<uint8_t> orig((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), orig.size());
  EXPECT_TRUE(bytes == orig);
}

TEST(GgufReader, VocabOnlyFilesWithoutDataSection) {
  // These end right after the metadata (no tensors, no padding); that is valid.
  WEFT_NEED_SHARED_FILE(kVocabSpm);
  auto spm = File::open(kVocabSpm);
  EXPECT_TRUE(spm->tensors().empty());
  EXPECT_EQ(spm->metadata().size(), 22u);
  EXPECT_EQ(spm->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(spm->get_bool_opt("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(spm->get_bool_opt("tokenizer.ggml.add_eos_token"), false);
  WEFT_NEED_SHARED_FILE(kVocabGpt2);
  auto gpt2 = File::open(kVocabGpt2);
  EXPECT_EQ(gpt2->get_string("tokenizer.ggml.pre"), "gpt-2");
  const auto merges = gpt2->get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 50000u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");  // "Ġ t"
}

TEST(GgufReader, TypedAccessErrorsNameTheKey) {
  Writer w;
  w.set_string("s", "text");
  w.set_i32("neg", -3);
  w.set_u64("big", 0xffffffffffffffffull);
  w.set_u32("n", 5);
  w.set_f32_array("fa", {1.0f});
  const auto b = w.to_bytes();
  auto f = File::parse(b.data(), b.size(), "mem.gguf");

  auto expect_msg = [](auto&& fn, const std::string& fragment) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { f->get_int("s"); }, "key 's' has type string");
  expect_msg([&] { f->get_string("missing.key"); }, "mem.gguf: missing key 'missing.key'");
  expect_msg([&] { f->find("neg")->as_u64("neg"); }, "'neg' is -3");
  expect_msg([&] { f->get_int("big"); }, "'big' is 18446744073709551615");
  expect_msg([&] { f->get_bool_opt("n"); }, "'n' has type u32");
  expect_msg([&] { f->get_string_array("fa"); }, "'fa' has type f32");
  expect_msg([&] { f->find("n")->as_array("n"); }, "not array");
  EXPECT_EQ(f->get_int_opt("absent"), std::nullopt);
  EXPECT_EQ(*f->get_float_opt("n"), 5.0);  // integers widen to double
  EXPECT_EQ(f->find("big")->as_u64("big"), 0xffffffffffffffffull);
}

TEST(GgufReader, OpenErrorsNameThePath) {
  const auto dir = std::filesystem::temp_directory_path();
  try {
    File::open((dir / "weft-no-such-file.gguf").string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weft-no-such-file.gguf: cannot open"), std::string::npos) << e.what();
  }
  EXPECT_ERROR(File::open(dir.string()), "not a regular file");  // a directory
  const auto empty = dir / ("weft-empty-" + std::to_string(::getpid()) + ".gguf");
  { std::ofstream(empty.string()); }
  EXPECT_ERROR(File::open(empty.string()), "file is empty");
  std::filesystem::remove(empty);
}

}  // namespace
}  // namespace weft::gguf
