// Test helpers: `weft worker` child processes and `weft run` invocations.
#pragma once

#include "core/error.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace weft::device::remote::testing_support {

// A `weft worker --listen HOST:0` child (optionally run under `prefix`, e.g. ip netns exec NS);
// the port is read from its first line of output. Workers in tests block rather than busy-poll
// (several share a few cores with the test) and cache nowhere unless told.
class Worker {
 public:
  // `log`: a file for the worker's stderr (otherwise dropped unless WEFT_TEST_WORKER_LOG is set).
  explicit Worker(std::vector<std::string> extra = {}, std::string host = "127.0.0.1",
                  std::vector<std::string> prefix = {}, const std::string& log = "")
      : host_(std::move(host)) {
    args_ = std::move(prefix);
    for (const char* a : {WEFT_BINARY, "worker", "--listen"}) args_.push_back(a);
    args_.push_back(host_ + ":0");
    bool has_cache = false, has_poll = false;
    for (const auto& e : extra) {
      has_cache |= e == "--cache-dir" || e == "--no-cache";
      has_poll |= e == "--net-poll";
    }
    if (!has_cache) extra.push_back("--no-cache");
    if (!has_poll) extra.insert(extra.end(), {"--net-poll", "block"});
    args_.insert(args_.end(), extra.begin(), extra.end());
    log_ = log;
    start();
  }
  ~Worker() { kill(SIGTERM); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGSTOP || sig == SIGCONT) return;
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // A worker killed before starts again, as it was, on the same port (a restarted host).
  void restart() {
    WEFT_ASSERT(pid_ <= 0);
    for (auto& a : args_)
      if (a == host_ + ":0") a = address();
    restarted_ = true;
    start();
  }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::string url() const { return "tcp://" + address(); }

 private:
  void start() {
    int fds[2];
    WEFT_ASSERT(::pipe(fds) == 0);
    pid_ = ::fork();
    WEFT_ASSERT(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      if (!log_.empty())
        std::freopen(log_.c_str(), restarted_ ? "a" : "w", stderr);  // a restart adds to its log
      else if (!std::getenv("WEFT_TEST_WORKER_LOG"))
        std::freopen("/dev/null", "w", stderr);
      ::close(fds[0]);
      std::vector<char*> argv;
      for (auto& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    char c;
    while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(fds[0]);
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos) fail("test", "worker did not start: '{}'", line);
    port_ = std::stoi(line.substr(colon + 1));
  }

  std::string host_, log_;
  std::vector<std::string> args_;
  bool restarted_ = false;
  pid_t pid_ = -1;
  int port_ = 0;
};

// A key file as a user would make it: the text, then chmod 600 (workers refuse wider modes).
inline void write_key_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0600);
}

inline std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// Greedy text of `weft run` and its exit status (generated vocabularies need not be UTF-8); on
// failure, the last lines of its stderr follow, so a test's message says why.
inline std::string greedy_text(const std::string& model, const std::string& devices, const std::string& extra = "") {
  const std::string err = "/tmp/weft_greedy_stderr_" + std::to_string(::getpid());
  return shell(std::string(WEFT_BINARY) + " run --temp 0 -n 24 -p 'Once upon a time' -m " + model + " --devices " +
               devices + " --net-poll block " + extra + " 2>" + err +
               "; s=$?; echo \"exit=$s\"; [ $s = 0 ] || tail -n 3 " + err + "; rm -f " + err);
}

inline std::string stories() { return std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf"; }

// Forks `weft run` generating "forever" on devices (then `extra` flags); stderr goes to err_path.
inline pid_t start_long_run(const std::string& devices, const std::string& err_path,
                            const std::vector<std::string>& extra = {}) {
  const pid_t pid = ::fork();
  WEFT_ASSERT(pid >= 0);
  if (pid == 0) {
    std::freopen("/dev/null", "w", stdout);
    std::freopen(err_path.c_str(), "w", stderr);
    std::vector<std::string> args = {WEFT_BINARY,  "run",  "--temp",           "0",  "-n",      "200000",    "-c",
                                     "200001",     "-p",   "Once upon a time", "-m", stories(), "--devices", devices,
                                     "--net-poll", "block"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(WEFT_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Workers in network namespaces on one bridge (scripts/netbed.sh, which the network benchmark
// shares), the coordinator in the test's namespace; links shaped by a profile.
class Netbed {
 public:
  Netbed(int n, const std::string& profile) : tag_(std::to_string(::getpid() % 10000)), n_(n) {
    const std::string out = ::testing::TempDir() + "/weft_netbed_" + tag_;
    const int rc = std::system(
        (script() + " up " + tag_ + " " + std::to_string(n) + " " + profile + " >" + out + " 2>" + out + ".err")
            .c_str());
    std::ifstream in(out);
    std::string ns, ip;
    while (in >> ns >> ip) hosts_.push_back({ns, ip});
    ok_ = rc == 0 && static_cast<int>(hosts_.size()) == n;
    if (!ok_) {
      std::ifstream err(out + ".err");
      why_.assign(std::istreambuf_iterator<char>(err), {});
      down();
    }
  }
  ~Netbed() { down(); }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::string& ns(int i) const { return hosts_.at(i).first; }
  const std::string& ip(int i) const { return hosts_.at(i).second; }

 private:
  static std::string script() { return std::string(WEFT_SOURCE_DIR) + "/scripts/netbed.sh"; }
  void down() { std::system((script() + " down " + tag_ + " " + std::to_string(n_) + " >/dev/null 2>&1").c_str()); }
  std::string tag_, why_;
  int n_;
  std::vector<std::pair<std::string, std::string>> hosts_;
  bool ok_ = false;
};

}  // namespace weft::device::remote::testing_support
