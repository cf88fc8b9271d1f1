// `weft serve` as a script starts it: the address line comes first, /health turns 200 once the
// model has loaded, and start-up mistakes end the process with a message naming the flag.
#include "test_server.h"

#include "device/worker_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

namespace weft::serve::test_support {
namespace {

using device::remote::testing_support::shell;

std::string write_model(const std::string& name, const tools::GenModelOptions& o) {
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  const auto bytes = tools::generate_model_bytes(o);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

// `weft serve ARGS` in a child process; its first stdout line is read (the address line).
class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> args) {
    args.insert(args.begin(), {WEFT_BINARY, "serve"});
    int fds[2];
    WEFT_ASSERT(::pipe(fds) == 0);
    pid_ = ::fork();
    WEFT_ASSERT(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      std::freopen("/dev/null", "w", stderr);
      ::close(fds[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    char c;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') first_line_ += c;
    ::close(fds[0]);
  }
  ~ServeProcess() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  const std::string& first_line() const { return first_line_; }

 private:
  pid_t pid_ = -1;
  std::string first_line_;
};

TEST(ServeCli, PrintsItsAddressThenServesOnceLoaded) {
  const std::string model = write_model("serve_cli", {});
  ServeProcess p({"-m", model, "--port", "0", "-np", "2", "-c", "256", "-t", "1"});
  const std::string prefix = "weft serve: listening on http://127.0.0.1:";
  ASSERT_EQ(p.first_line().rfind(prefix, 0), 0u) << p.first_line();
  httplib::Client c("127.0.0.1", std::stoi(p.first_line().substr(prefix.size())));
  c.set_read_timeout(30);
  ASSERT_TRUE(eventually([&] { return get(c, "/health").status == 200; }));
  // Greedy: a sampled token of this random model is EOS now and then (a CI run got 2 tokens).
  const Reply r = post(c, "/v1/completions", json{{"prompt", "hello"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["model"], "serve_cli");  // the file's name without .gguf
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 3);
}

TEST(ServeCli, UnrecognisedChatTemplateEndsStartUpNamingTheFlag) {
  tools::GenModelOptions o;
  o.chat_template = "{{ something weft has never seen }}";
  const std::string model = write_model("serve_cli_template", o);
  const std::string out = shell(std::string(WEFT_BINARY) + " serve --port 0 -m " + model + " 2>&1; echo \"exit=$?\"");
  EXPECT_NE(out.find("--chat-template"), std::string::npos) << out;
  EXPECT_NE(out.find("exit=1"), std::string::npos) << out;
  EXPECT_EQ(out.find("listening"), std::string::npos) << out;
}

TEST(ServeCli, BeyondLoopbackWithoutAKeyIsRefused) {
  const std::string model = write_model("serve_cli_key", {});
  const std::string out =
      shell(std::string(WEFT_BINARY) + " serve --host 0.0.0.0 --port 0 -m " + model + " 2>&1; echo \"exit=$?\"");
  EXPECT_NE(out.find("beyond loopback requires --api-key or --api-key-file"), std::string::npos) << out;
  EXPECT_NE(out.find("exit=1"), std::string::npos) << out;
}

TEST(ServeCli, AnEmptyHostIsAnEmptyValueNotTheNextFlag) {
  // --host '' once took the next word ("--port=0") as the address.
  const std::string model = write_model("serve_cli_empty_host", {});
  const std::string out =
      shell(std::string(WEFT_BINARY) + " serve --host '' --port 0 -m " + model + " 2>&1; echo \"exit=$?\"");
  EXPECT_NE(out.find("--host is empty"), std::string::npos) << out;
  EXPECT_NE(out.find("exit=1"), std::string::npos) << out;
}

}  // namespace
}  // namespace weft::serve::test_support
