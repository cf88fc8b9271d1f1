#include "apps/weft/terminal.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace weft::cli::terminal {
namespace {

volatile sig_atomic_t g_replying = 0;
volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_exit = 0;

void on_sigint(int) {
  if (g_exit) _exit(130);  // a third Ctrl-C: the way out when a step does not return
  if (g_replying && !g_stop)
    g_stop = 1;
  else
    g_exit = 1;
}

// One raw line (no continuation); nullopt at end of input with nothing read, or on exit.
std::optional<std::string> read_raw_line() {
  std::string line;
  for (;;) {
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) {
      if (g_exit) return std::nullopt;
      continue;
    }
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (c == '\n') return line;
    line += c;
  }
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: read() returns EINTR
  sigaction(SIGINT, &sa, nullptr);
}

void begin_reply() {
  g_stop = 0;
  g_replying = 1;
}
void end_reply() { g_replying = 0; }
bool stop_requested() { return g_stop != 0 || g_exit != 0; }
bool exit_requested() { return g_exit != 0; }

std::optional<std::string> read_line() {
  std::optional<std::string> line = read_raw_line();
  while (line && !line->empty() && line->back() == '\\') {
    line->back() = '\n';
    std::optional<std::string> more = read_raw_line();
    if (!more) break;
    *line += *more;
  }
  if (line && !line->empty() && line->back() == '\r') line->pop_back();  // input from a file with CRLF
  return line;
}

}  // namespace weft::cli::terminal
