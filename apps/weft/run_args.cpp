#include "apps/weft/run_args.h"

#include "core/error.h"
#include "core/text_file.h"

#include <unistd.h>

namespace weft::cli {

bool RunArgs::colored() const {
  if (color == "auto") return isatty(STDOUT_FILENO) != 0;
  return color != "off";  // "on", or -co given without a value
}

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

std::string read_text_file(const std::string& path, const char* flag) {
  std::string s = weft::read_text_file(path, flag);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace weft::cli
