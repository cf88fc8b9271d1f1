// Progress lines: drawn only on a terminal (here a pseudo-terminal in place of stderr), never with
// logging disabled or into a pipe; bars of one label share one line with their totals added.
#include "core/progress.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace weft {
namespace {

// Runs f with stderr on a fresh pseudo-terminal (or a pipe) and returns what it wrote there.
template <typename F>
std::string stderr_of(bool terminal, F f) {
  int reader = -1, writer = -1;
  if (terminal) {
    EXPECT_EQ(::openpty(&reader, &writer, nullptr, nullptr, nullptr), 0);
  } else {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    reader = p[0], writer = p[1];
  }
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(writer, 2);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(writer);
  ::fcntl(reader, F_SETFL, O_NONBLOCK);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(reader, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(reader);
  return out;
}

// Two devices loading at once: 3 + 7 units, 5 done when the line is drawn.
void two_bars() {
  Progress a("loading test", 3, "units"), b("loading test", 7, "units");
  a.add(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past the quiet first half second
  b.add(3);
}

TEST(Progress, OneLineOnATerminalOnly) {
  set_log_disabled(false);
  const std::string tty = stderr_of(true, two_bars);
  EXPECT_NE(tty.find("loading test  50% (5 / 10 units)"), std::string::npos) << tty;
  EXPECT_NE(tty.rfind("\r\033[K"), std::string::npos) << tty;  // erased at the end
  EXPECT_EQ(stderr_of(false, two_bars), "");                   // a pipe: nothing
  set_log_disabled(true);
  EXPECT_FALSE(progress_visible());
  EXPECT_EQ(stderr_of(true, two_bars), "");  // --log-disable: nothing
  set_log_disabled(false);
  // Quick work draws nothing, even on a terminal.
  EXPECT_EQ(stderr_of(true, [] { Progress("quick", 4).add(4); }), "");
}

}  // namespace
}  // namespace weft
