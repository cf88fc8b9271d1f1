// llama.cpp's flags on `weft run`: its multi-letter single-dash names (which CLI11 alone misreads:
// -cnv as "-c nv", -ngl 99 as "-n gl"), unknown flags, escapes, -f, -n -1, display and logging.
#include "cli/cli_run.h"
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

using weft::test_cli::chat_model;
using weft::test_cli::run;
using weft::test_cli::tiny_model;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string greedy(const std::string& flags) { return "run -m " + tiny_model() + " --temp 0 " + flags; }

TEST(LlamaFlags, MultiLetterSingleDashFlagsAreReadAsLlamaCppReadsThem) {
  // Each was misread before: "-cnv" as "-c nv" ("--ctx-size: Value nv"), "-ngl 99" as "-n gl".
  auto r = run("run -m " + chat_model() + " -cnv -p hi -st -n 2 --temp 0", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(has(r.out, "Value nv")) << r.out;
  EXPECT_TRUE(has(r.out, "> hi\n")) << r.out;

  // Each accepted with llama.cpp's meaning, or one line saying it means nothing here.
  r = run(greedy("-p hi -n 2 -ngl 99 -mg 1 -fa -np 4 --no-mmap --mlock -ctk f32 -ctv f32 -ts 1 -no-cnv"), true);
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* note : {"note: -ngl 99: weft has no GPU devices", "note: -mg 1",
                           "note: -fa: weft's attention is always fused", "note: -np 4: weft run decodes one sequence"})
    EXPECT_TRUE(has(r.out, note)) << note << ": " << r.out;
  for (const std::string flags : {"-fa on -sm layer --gpu-layers all", "--flash-attn auto --mmap --no-mmap"}) {
    r = run(greedy("-p hi -n 2 " + flags), true);
    EXPECT_EQ(r.code, 0) << flags << ": " << r.out;
  }
  // The model flags are every model command's: bench and plan say the same.
  EXPECT_TRUE(has(run("plan -m " + tiny_model() + " -ngl 99", true).out, "note: -ngl 99")) << "plan";
  // Flags after a value that starts with '-' still parse, and such a value stays a value.
  r = run(greedy("-p -dash -n 0 --log-disable"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "-dash");
}

TEST(LlamaFlags, AnUnknownFlagIsReportedWithTheClosestKnownOne) {
  struct Case {
    std::string flag, suggestion;
  };
  for (const Case& c : {Case{"-cnvv", "'-cnv'"}, Case{"--n-predictt 3", "'--n-predict'"}, Case{"-ngll 9", "'-ngl'"},
                        Case{"--temprature 0", "'--temperature'"}, Case{"-sysx x", "'-sys'"}}) {
    const auto r = run(greedy("-p hi " + c.flag), true);
    EXPECT_EQ(r.code, 1) << c.flag;
    const std::string name = c.flag.substr(0, c.flag.find(' '));
    EXPECT_TRUE(has(r.out, "unknown flag '" + name + "' for 'weft run'")) << r.out;
    EXPECT_TRUE(has(r.out, "did you mean " + c.suggestion)) << r.out;
  }
}

TEST(LlamaFlags, EscapesAreProcessedUnlessNoEscape) {
  auto r = run(greedy(R"(-p 'a\nb\tc\\d\"e\x41\q' -n 0 --log-disable)"));
  EXPECT_EQ(r.out, "a\nb\tc\\d\"eA\\q");  // an unknown escape stays as written
  r = run(greedy(R"(-p 'a\nb' -n 0 --log-disable --no-escape)"));
  EXPECT_EQ(r.out, R"(a\nb)");
  r = run(greedy(R"(-p 'x\x4' -n 0 --log-disable)"));  // \x needs two hex digits
  EXPECT_EQ(r.out, R"(x\x4)");
}

TEST(LlamaFlags, PromptFromAFile) {
  const auto path = std::filesystem::path(testing::TempDir()) / "weft_prompt.txt";
  std::ofstream(path) << "from a file\n";  // its last newline is dropped, as llama.cpp does
  auto r = run(greedy("-f " + path.string() + " -n 0 --log-disable"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "from a file");
  r = run(greedy("-f /nonexistent/prompt.txt -n 1"), true);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out, "-f /nonexistent/prompt.txt: cannot open")) << r.out;
  r = run(greedy("-f " + path.string() + " -p hi -n 1"), true);
  EXPECT_NE(r.code, 0) << "-p and -f together";
}

TEST(LlamaFlags, AnEmptyValueIsAnEmptyStringNotTheNextFlag) {
  // -p '' once took "--n-predict=4" as the prompt and generated 128 tokens.
  auto r = run(greedy("-p '' -n 2 --json"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "\"prompt\":\"\"")) << r.out;
  EXPECT_TRUE(has(r.out, "\"prompt_ids\":[1]")) << r.out;  // BOS alone
  EXPECT_TRUE(has(r.out, "\"generated_ids\":[")) << r.out;
  EXPECT_FALSE(has(r.out, "n-predict")) << r.out;
  r = run("tokenize -m " + tiny_model() + " -p ''", true);
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(LlamaFlags, FilesThatAreNotFilesAndNumbersThatAreNotNumbers) {
  const std::string dir = testing::TempDir();
  // A directory, a device that never ends, a FIFO nobody writes: each a clear error, no wait.
  for (const std::string& f : {dir, std::string("/dev/zero")}) {
    const auto r = run(greedy("-f " + f + " -n 1"), true);
    EXPECT_EQ(r.code, 1) << f << ": " << r.out;
    EXPECT_TRUE(has(r.out, "[cli] -f " + f)) << r.out;
  }
  const auto fifo = std::filesystem::path(dir) / ("weft_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run("run -m " + fifo.string() + " -p hi -n 1", true);  // waited for a writer forever
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "not a regular file")) << r.out;
  std::filesystem::remove(fifo);
  // NaN passes a range check written as "v < lo || v > hi"; 0 and 1e-46 (0 as a float) divide logits by 0.
  for (const std::string flags : {"--temp nan", "--top-p nan", "--min-p nan", "--repeat-penalty 0",
                                  "--repeat-penalty 1e-46", "--repeat-penalty nan"}) {
    r = run(greedy("-p hi -n 1 " + flags), true);
    EXPECT_NE(r.code, 0) << flags << ": " << r.out;
    EXPECT_LT(r.code, 128) << flags << ": " << r.out;
  }
}

TEST(LlamaFlags, NMinusOneGoesOnUntilTheContextIsFull) {
  // The random-weight model never draws </s>: -n -1 stops at the context (-c 24), saying so.
  auto r = run(greedy("-p 'a b' -n -1 -c 24"), true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "context full (-c 24): stopped after")) << r.out;
  auto j = run(greedy("-p 'a b' -n -1 -c 24 --json"));
  EXPECT_TRUE(has(j.out, "\"stop\":\"context_full\"")) << j.out;
  EXPECT_NE(run(greedy("-p hi -n -2"), true).code, 0);
}

TEST(LlamaFlags, DisplayColorAndLogging) {
  const std::string with = run(greedy("-p hello -n 3 --log-disable")).out;
  const std::string without = run(greedy("-p hello -n 3 --log-disable --no-display-prompt")).out;
  ASSERT_EQ(with.rfind("hello", 0), 0u) << with;
  EXPECT_EQ(without, with.substr(5));  // the same generation, without the prompt

  const std::string colored = run(greedy("-p hello -n 0 --log-disable --color")).out;
  EXPECT_EQ(colored, "\x1b[33mhello\x1b[0m");
  EXPECT_EQ(run(greedy("-p hello -n 0 --log-disable -co off")).out, "hello");
  EXPECT_EQ(run(greedy("-p hello -n 0 --log-disable --color auto")).out, "hello");  // not a terminal

  // stderr: the timings by default, nothing with --log-disable, the prompt's tokens with -v.
  const std::string timings = run(greedy("-p hello -n 1"), true).out;
  EXPECT_TRUE(has(timings, "generation: 1 tokens")) << timings;
  EXPECT_TRUE(has(timings, "| kernels " + weft::kernels::kernel_summary() + "\n")) << timings;  // the load's line
  EXPECT_EQ(run(greedy("-p hello -n 1 --log-disable -ngl 1"), true).out.find("load:"), std::string::npos);
  EXPECT_EQ(run(greedy("-p hello -n 1 --log-disable -ngl 1"), true).out.find("note"), std::string::npos);
  for (const char* v : {"-v", "--verbose"}) {
    const std::string err = run(greedy(std::string("-p hello -n 1 ") + v), true).out;
    EXPECT_TRUE(has(err, "prompt: ") && has(err, " tokens: [1, ")) << err;  // BOS first
  }
}

TEST(LlamaFlags, ConversationFlagsAndTheirErrors) {
  // A single turn with a system prompt: -v shows what was fed.
  auto r = run("run -m " + chat_model() + " -cnv -sys 'Be brief.' -p hello -st -n 3 --temp 0 -v", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "chat template: the model's, on the Jinja engine (fallback: chatml)")) << r.out;
  EXPECT_TRUE(has(r.out, "prompt tokens fed, 3 drawn")) << r.out;
  // weft chat is run -cnv; stdin at its end closes the chat.
  EXPECT_EQ(run("chat -m " + chat_model() + " -n 2 --temp 0 < /dev/null", true).code, 0);
  // The model's template can be overridden by name, and an unknown one fails before loading.
  r = run("chat -m " + chat_model() + " --chat-template llama3 -p hi -st -n 1 --temp 0", true);
  EXPECT_TRUE(has(r.out, "chat template: llama3 (--chat-template)")) << r.out;
  r = run("chat -m " + chat_model() + " --chat-template chatml3 -p hi -st", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out, "--chat-template 'chatml3' is neither a built-in template name")) << r.out;
  EXPECT_FALSE(has(r.out, "load:")) << "refused before the model loads";
  // A model without a template chats with chatml, and says so.
  r = run("chat -m " + tiny_model() + " -p hi -st -n 1 --temp 0", true);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "has no chat template (tokenizer.chat_template); using chatml")) << r.out;
  // --json and a conversation do not go together; a plain run needs a prompt.
  EXPECT_TRUE(has(run("run -m " + chat_model() + " -cnv --json", true).out, "--json prints one generation"));
  EXPECT_TRUE(has(run("run -m " + chat_model(), true).out, "no prompt: give one with -p or -f"));
  // gen-model refuses a template it could not write the tokens of.
  r = run("gen-model -o " + testing::TempDir() + "/weft_no.gguf --chat-template nope", true);
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out, "--chat-template 'nope'")) << r.out;
}

TEST(LlamaFlags, ChatTemplateKwargsReachTheTemplateAndBadOnesEndTheCommand) {
  // A template that writes more when enable_thinking is false: the prompt fed grows by that text.
  const std::string model =
      weft::test_cli::generated_model("kwargs",
                                      "--chat-template '{% for m in messages %}{{ m.content }}{% endfor %}"
                                      "{% if not enable_thinking %} thinking is off so answer at once{% endif %}'");
  auto fed = [&](const std::string& flags) {
    const auto r = run("run -m " + model + " -cnv -p hello -st -n 1 --temp 0 -v " + flags, true);
    EXPECT_EQ(r.code, 0) << r.out;
    const size_t end = r.out.find(" prompt tokens fed");
    const size_t begin = r.out.rfind('[', end);
    if (end == std::string::npos || begin == std::string::npos) {
      ADD_FAILURE() << r.out;
      return -1;
    }
    return std::stoi(r.out.substr(begin + 1, end - begin - 1));
  };
  const int on = fed(""), off = fed(R"(--chat-template-kwargs '{"enable_thinking": false}')");
  EXPECT_GT(off, on);
  // Checked as the flags are read, before the model loads, by run, chat and serve alike.
  for (const std::string cmd : {"run -cnv -p hi -st", "chat -p hi -st", "serve --port 0"}) {
    auto r = run(cmd + " -m " + model + " --chat-template-kwargs '[1]'", true);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_LT(r.code, 128) << cmd << ": " << r.out;
    EXPECT_TRUE(has(r.out, "--chat-template-kwargs")) << r.out;
    EXPECT_TRUE(has(r.out, "must be a JSON object, got array")) << r.out;
    EXPECT_FALSE(has(r.out, "listening")) << r.out;
    r = run(cmd + " -m " + model + " --chat-template-kwargs '{enable_thinking: 0}'", true);
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_TRUE(has(r.out, "not valid JSON")) << r.out;
  }
}

}  // namespace
