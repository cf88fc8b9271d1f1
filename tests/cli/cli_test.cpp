// The `weft` binary end to end: exact text on the reference model, flags, and clear failures.
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

struct Result {
  int code;
  std::string out;  // stdout (stderr to /dev/null or merged when asked)
};

Result run(const std::string& args, bool merge_stderr = false) {
  const std::string cmd = std::string(WEFT_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

const std::string kShared = WEFT_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K.gguf";

// From ../shared/models/SOURCES.txt: greedy 60 tokens after BOS + "Once upon a time".
const std::string kReference =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a "
    "big, red ball. She wanted to play with it, but it was too high.\nLily";

TEST(Cli, RunPrintsTheReferenceTextOnEverySplit) {
  WEFT_NEED_SHARED_FILE(kStories);
  for (const std::string devices :
       {"", "--mmap", "-ctk f32 -ctv f32", "--devices cpu:1,cpu:1", "--devices cpu:1,cpu:1 --mmap",
        "--devices cpu:1,cpu:1,cpu:1 -ts 3,1,2", "--devices cpu:1,cpu:1 -sm layer"}) {
    auto r = run("run -m " + kStories + " -p \"Once upon a time\" -n 60 --temp 0 " + devices);
    EXPECT_EQ(r.code, 0) << devices;
    EXPECT_EQ(r.out, kReference) << devices;
  }
}

TEST(Cli, JsonHasIdsAndTimings) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("run -m " + kStories + " -p \"Once upon a time\" -n 4 --temp 0 --json");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("\"prompt_ids\":[1,403,407,261,378]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"generated_ids\":[432,383,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"gen_tokens_per_s\""), std::string::npos);
}

// A generated model of the project's own (no ../shared needed).
std::string tiny_model() {
  static const std::string path = [] {
    const std::string p = testing::TempDir() + "/weft_cli_tiny.gguf";
    EXPECT_EQ(run("gen-model -o " + p + " --preset tiny --type q8_0").code, 0);
    return p;
  }();
  return path;
}

TEST(Cli, ContextFullStopsSayingSo) {
  // 4 prompt tokens and -n 100 in a context of 16: llama.cpp says why it stopped early; so must we.
  auto r = run("run -m " + tiny_model() + " -p \"a b c\" -n 100 -c 16 --temp 0", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("context full (-c 16)"), std::string::npos) << r.out;
  auto j = run("run -m " + tiny_model() + " -p \"a b c\" -n 100 -c 16 --temp 0 --json");
  EXPECT_NE(j.out.find("\"stop\":\"context_full\""), std::string::npos) << j.out;
  auto ok = run("run -m " + tiny_model() + " -p \"a b c\" -n 2 -c 16 --temp 0", true);
  EXPECT_EQ(ok.out.find("context full"), std::string::npos) << ok.out;
}

TEST(Cli, GenModelWritesAChatTemplateAndItsControlTokens) {
  const std::string p = testing::TempDir() + "/weft_cli_chatml.gguf";
  ASSERT_EQ(run("gen-model -o " + p + " --chat-template chatml").code, 0);
  EXPECT_NE(run("info " + p).out.find("tokenizer.chat_template                 string       \"chatml\""),
            std::string::npos);
  // BOS, then <|im_start|> as one control token (the last ids), then "user" in pieces.
  const auto ids = run("tokenize -m " + p + " -p \"<|im_start|>user\"").out;
  EXPECT_EQ(ids.rfind("[1, 318, ", 0), 0u) << ids;
  auto bad = run("gen-model -o " + p + " --chat-template nonsense", true);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--chat-template 'nonsense'"), std::string::npos) << bad.out;
}

TEST(Cli, TokenizePrintsIds) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("tokenize -m " + kStories + " -p \"Once upon a time\"");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
}

TEST(Cli, PlanShowsTwoAllReducesPerLayer) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto r = run("plan -m " + kStories + " --devices cpu:1,cpu:1,cpu:1");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("layer 0: 2: all_reduce after attn_output"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fallbacks (ops without a split rule, gathered and replicated): none"), std::string::npos)
      << r.out;
}

TEST(Cli, PlanSizesCollectivesInTheWireType) {
  WEFT_NEED_SHARED_FILE(kStories);
  // stories260K: n_embd 64, 5 layers, two all-reduces each.
  auto f32 = run("plan -m " + kStories + " --devices cpu:1,cpu:1");
  EXPECT_NE(f32.out.find("after attn_output (256 B)"), std::string::npos) << f32.out;
  EXPECT_NE(f32.out.find("total: 10 collectives, 2560 bytes per rank per token (f32)"), std::string::npos) << f32.out;
  auto bf16 = run("plan -m " + kStories + " --devices cpu:1,cpu:1 --wire bf16");
  EXPECT_NE(bf16.out.find("after attn_output (128 B)"), std::string::npos) << bf16.out;
  EXPECT_NE(bf16.out.find("total: 10 collectives, 1280 bytes per rank per token (bf16)"), std::string::npos)
      << bf16.out;
}

TEST(Cli, BadInputGivesAClearErrorAndNonZeroExit) {
  const std::string missing = "run -m /nonexistent.gguf -p hi";
  auto r = run(missing, true);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;

  const auto bad = std::filesystem::temp_directory_path() / "weft_cli_bad.gguf";
  std::ofstream(bad) << "GGUF this is not a model";
  r = run("run -m " + bad.string() + " -p hi", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("[gguf]"), std::string::npos) << r.out;

  if (std::filesystem::exists(kStories)) {
    for (const std::string flags :
         {"--devices cpu:0", "--devices gpu:1", "--devices cpu:1,cpu:1 -ts 1", "-ts 1,x --devices cpu:1,cpu:1",
          "-sm diagonal", "--devices cpu:1,cpu:1 -ts 0,0", "-c 4 -n 10", "-ctk q8_0"}) {
      r = run("run -m " + kStories + " -p \"Once upon a time\" --temp 0 " + flags, true);
      EXPECT_NE(r.code, 0) << flags << ": " << r.out;
      EXPECT_LT(r.code, 128) << flags << " crashed: " << r.out;
    }
  }
  r = run("frobnicate", true);
  EXPECT_NE(r.code, 0);
}

}  // namespace
