// Running the weft binary from the CLI tests: its exit code and output, and the generated
// models they share (no ../shared needed).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

namespace weft::test_cli {

struct Result {
  int code;
  std::string out;  // stdout (stderr to /dev/null or merged when asked)
};

inline Result run(const std::string& args, bool merge_stderr = false) {
  const std::string cmd = std::string(WEFT_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// weft gen-model's tiny preset, once per test process (ctest runs tests in parallel, each in a
// process of its own: a shared path would have two of them writing one file); `extra` adds flags.
inline std::string generated_model(const std::string& name, const std::string& extra) {
  const std::string p = testing::TempDir() + "/weft_cli_" + name + "_" + std::to_string(::getpid()) + ".gguf";
  EXPECT_EQ(run("gen-model -o " + p + " --preset tiny --type q8_0 " + extra).code, 0) << extra;
  return p;
}

inline std::string tiny_model() {
  static const std::string path = generated_model("tiny", "");
  return path;
}

// The tiny model with a ChatML template and its <|im_start|> / <|im_end|> control tokens.
inline std::string chat_model() {
  static const std::string path = generated_model("chatml", "--chat-template chatml");
  return path;
}

}  // namespace weft::test_cli
