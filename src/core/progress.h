// Progress on stderr for long waits (weights loaded or streamed, long prompts): shown only when
// stderr is a terminal and logging is on (llama.cpp's --log-disable turns it off), redrawn at most
// five times a second on one line, erased when the work ends. Bars with the same label share that
// line, their totals added (devices loading at once show one bar).
#pragma once

#include <cstdint>
#include <string>

namespace weft {

void set_log_disabled(bool disabled);  // --log-disable: no progress, no notes or warnings on stderr
bool log_disabled();
bool progress_visible();  // logging on and stderr a terminal

class Progress {
 public:
  // total in units of `unit`, each `scale` of the counts add() takes ("MiB", 1 << 20).
  Progress(std::string label, uint64_t total, std::string unit = "", double scale = 1);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void add(uint64_t n);  // thread safe

 private:
  std::string label_;
  uint64_t total_ = 0, done_ = 0;
};

}  // namespace weft
