#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

namespace weft {
namespace {

std::atomic<bool> g_log_disabled{false};

using Clock = std::chrono::steady_clock;

// One line per label, summed over the bars that share it.
struct Line {
  uint64_t total = 0, done = 0;
  int bars = 0;
  std::string unit;
  double scale = 1;
  Clock::time_point started = Clock::now(), last_shown;
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, Line>& lines() {
  static std::map<std::string, Line> l;
  return l;
}

void draw(const std::string& label, const Line& l) {
  const double pct = 100.0 * static_cast<double>(l.done) / static_cast<double>(std::max<uint64_t>(l.total, 1));
  std::fprintf(stderr, "\r\033[K%s %3.0f%% (%.0f / %.0f%s%s)", label.c_str(), pct, l.done / l.scale, l.total / l.scale,
               l.unit.empty() ? "" : " ", l.unit.c_str());
  std::fflush(stderr);
}

}  // namespace

void set_log_disabled(bool disabled) { g_log_disabled = disabled; }
bool log_disabled() { return g_log_disabled; }
bool progress_visible() { return !g_log_disabled && ::isatty(2); }

Progress::Progress(std::string label, uint64_t total, std::string unit, double scale)
    : label_(std::move(label)), total_(total) {
  const std::lock_guard lock(mu());
  Line& l = lines()[label_];
  l.total += total;
  l.bars++;
  l.unit = std::move(unit);
  l.scale = scale > 0 ? scale : 1;
}

Progress::~Progress() {
  const std::lock_guard lock(mu());
  Line& l = lines()[label_];
  l.total -= std::min(l.total, total_);  // what was not done leaves the total too
  l.done -= std::min(l.done, done_);
  if (--l.bars > 0) return;
  const bool shown = l.last_shown != Clock::time_point{};
  lines().erase(label_);
  if (shown && progress_visible()) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

void Progress::add(uint64_t n) {
  n = std::min(n, total_ - std::min(total_, done_));
  const std::lock_guard lock(mu());
  done_ += n;
  Line& l = lines()[label_];
  l.done += n;
  // Quick work shows nothing; longer work a line redrawn at most five times a second.
  const auto now = Clock::now();
  if (!progress_visible() || now - l.started < std::chrono::milliseconds(500) ||
      now - l.last_shown < std::chrono::milliseconds(200))
    return;
  l.last_shown = now;
  draw(label_, l);
}

}  // namespace weft
