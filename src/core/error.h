// Errors: every failure below main() throws weft::Error tagged with its origin
// ("[gguf] ...", "[net] ..."), so the CLI can print one clear line and exit non-zero.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace weft {

class Error : public std::runtime_error {
 public:
  Error(std::string origin, const std::string& what)
      : std::runtime_error("[" + origin + "] " + what), origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

template <typename... Args>
[[noreturn]] void fail(const char* origin, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(origin, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace weft

// Invariant check that stays on in release builds: a broken invariant is a bug, reported, not UB.
#define WEFT_ASSERT(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) ::weft::fail("assert", "{}:{}: {} failed", __FILE__, __LINE__, #cond);    \
  } while (0)
