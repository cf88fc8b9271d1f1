// The engine's lines on stderr (a device lost, a re-plan, calibration): "[engine] ...", none under
// --log-disable.
#pragma once

#include "core/progress.h"

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace weft::runtime {

template <typename... Args>
void report(fmt::format_string<Args...> f, Args&&... args) {
  if (!log_disabled()) std::fprintf(stderr, "[engine] %s\n", fmt::format(f, std::forward<Args>(args)...).c_str());
}

}  // namespace weft::runtime
