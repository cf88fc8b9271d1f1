// `weft chat` on a terminal: a pseudo-terminal types into it and reads its screen, as a user
// would (echo, line editing and Ctrl-C as SIGINT come from the terminal, not from weft).
#include "cli/cli_run.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using weft::test_cli::chat_model;
using weft::test_cli::run;
using Clock = std::chrono::steady_clock;

// A process on a pseudo-terminal. Every wait is bounded: a hung chat fails the test.
class Terminal {
 public:
  explicit Terminal(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_ = forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }
  bool started() const { return pid_ > 0; }
  bool running() {
    int status = 0;
    if (exited_ || waitpid(pid_, &status, WNOHANG) != pid_) return !exited_;
    exited_ = true;
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }

  void type(const std::string& keys) { ASSERT_EQ(write(fd_, keys.data(), keys.size()), ssize_t(keys.size())); }

  // Reads until `count` occurrences of `text` are on the screen (from `from` on); false on timeout.
  bool wait_for(const std::string& text, size_t from = 0, size_t count = 1, int timeout_ms = 20000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (occurrences(text, from) >= count) return true;
      const int left =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0 || !read_some(left)) return false;
    }
  }
  // Reads whatever comes for `ms` milliseconds.
  void pump(int ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) read_some(10);
  }
  // The exit code once the process ends; -1 on timeout.
  int wait_exit(int timeout_ms = 20000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < deadline) {
      read_some(50);
      if (!running()) {
        while (read_some(50)) {
        }
        return code_;
      }
    }
    return -1;
  }
  // Everything shown so far, the terminal's "\r\n" as "\n".
  std::string screen() const {
    std::string s;
    for (char c : raw_)
      if (c != '\r') s += c;
    return s;
  }

 private:
  size_t occurrences(const std::string& text, size_t from) const {
    const std::string s = screen();
    size_t n = 0;
    for (size_t at = s.find(text, from); at != std::string::npos; at = s.find(text, at + text.size())) ++n;
    return n;
  }
  bool read_some(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) return false;
    raw_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = -1;
  std::string raw_;
};

// The replies `weft chat` gives these lines from a pipe: what the terminal must show too.
std::vector<std::string> piped_replies(const std::string& flags, const std::vector<std::string>& lines) {
  const auto input = std::filesystem::path(testing::TempDir()) / "weft_chat_input.txt";
  {
    std::ofstream f(input);
    for (const std::string& l : lines) f << l << "\n";
  }
  const std::string out = run("chat -m " + chat_model() + " " + flags + " --log-disable < " + input.string()).out;
  // stdout: "\n> " before each line read, each reply followed by "\n".
  std::vector<std::string> replies;
  for (size_t at = out.find("\n> "); at != std::string::npos;) {
    const size_t next = out.find("\n\n> ", at + 3);
    if (next == std::string::npos) break;
    replies.push_back(out.substr(at + 3, next - at - 3));
    at = next + 1;
  }
  return replies;
}

TEST(ChatTerminal, TwoTurnsWithASystemPromptThenExit) {
  const std::string flags = "-sys 'You are terse.' -n 10 --temp 0 -c 512";
  const std::vector<std::string> replies = piped_replies(flags, {"Hello there", "And again"});
  ASSERT_EQ(replies.size(), 2u);
  ASSERT_FALSE(replies[0].empty());

  Terminal t({WEFT_BINARY, "chat", "-m", chat_model(), "-sys", "You are terse.", "-n", "10", "--temp", "0", "-c", "512",
              "-v"});
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.wait_for("\n> ")) << t.screen();
  EXPECT_NE(t.screen().find("chat template: the model's, on the Jinja engine (fallback: chatml)"), std::string::npos)
      << t.screen();
  t.type("Hello there\r");
  // The typed line is echoed, the reply streamed after it, then the next prompt.
  ASSERT_TRUE(t.wait_for("\n> ", 0, 2)) << t.screen();
  EXPECT_NE(t.screen().find("> Hello there\n" + replies[0] + "\n"), std::string::npos) << t.screen();
  t.type("And again\r");
  ASSERT_TRUE(t.wait_for("\n> ", 0, 3)) << t.screen();
  // The second reply, from the cache of the first turn plus the new tokens only, is the same as
  // the piped run's.
  EXPECT_NE(t.screen().find("> And again\n" + replies[1] + "\n"), std::string::npos) << t.screen();
  t.type("/exit\r");
  EXPECT_EQ(t.wait_exit(), 0) << t.screen();
  // -v: the second turn fed fewer tokens than the first (the system prompt and first exchange
  // stayed in the cache).
  const std::string s = t.screen();
  const size_t first = s.find("prompt tokens fed");
  const size_t second = s.find("prompt tokens fed", first + 1);
  ASSERT_NE(second, std::string::npos) << s;
  auto fed = [&](size_t at) { return std::stoi(s.substr(s.rfind('[', at) + 1)); };
  EXPECT_LT(fed(second), fed(first)) << s;
}

TEST(ChatTerminal, CtrlCStopsAReplyAndCtrlCAtThePromptExits) {
  // A reply long enough to be interrupted: up to the context, on a slower model.
  const std::string model = weft::test_cli::generated_model(
      "chat_slow", "--chat-template chatml --ctx 8192 --n-embd 256 --n-layer 4 --n-ff 512 --n-head 4 --n-head-kv 4");
  Terminal t({WEFT_BINARY, "chat", "-m", model, "--temp", "0", "-c", "8192", "-n", "-1"});
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.wait_for("\n> ")) << t.screen();
  t.type("Tell me everything\r");
  ASSERT_TRUE(t.wait_for("Tell me everything\n")) << t.screen();
  const size_t reply_start = t.screen().find("Tell me everything\n") + 19;
  // Some of the reply is on the screen: the model is generating. Ctrl-C stops it...
  for (int i = 0; i < 400 && t.screen().size() < reply_start + 8; ++i) t.pump(50);
  t.type("\x03");
  // ... and the chat is back at its prompt, still running.
  ASSERT_TRUE(t.wait_for("\n> ", reply_start)) << t.screen();
  EXPECT_EQ(t.screen().find("context full"), std::string::npos) << "the reply ran to the end instead";
  t.pump(200);
  ASSERT_TRUE(t.running()) << "the first Ctrl-C must stop the reply, not the chat: " << t.screen();
  // At the prompt, Ctrl-C ends the chat (exit 130, as llama.cpp).
  t.type("\x03");
  EXPECT_EQ(t.wait_exit(), 130) << t.screen();
}

TEST(ChatTerminal, EndOfInputClosesTheChat) {
  Terminal t({WEFT_BINARY, "chat", "-m", chat_model(), "-n", "4", "--temp", "0"});
  ASSERT_TRUE(t.started());
  ASSERT_TRUE(t.wait_for("\n> ")) << t.screen();
  t.type("\x04");  // Ctrl-D on an empty line
  EXPECT_EQ(t.wait_exit(), 0) << t.screen();
}

}  // namespace
