// Reading a file a user names on the command line (a prompt, a template, a text to score): a
// regular file or a pipe (`-f <(cmd)`), never a directory or a device such as /dev/zero, and never
// more than a bound, so a wrong path is an error and not an endless read or an empty prompt.
#pragma once

#include <cstddef>
#include <string>

namespace weft {

inline constexpr size_t kMaxTextFileBytes = size_t{1} << 30;

// The whole file; throws weft::Error (origin "cli", naming `what` and the path) when it cannot be
// opened, is not a regular file or a pipe, or holds more than max_bytes.
std::string read_text_file(const std::string& path, const char* what, size_t max_bytes = kMaxTextFileBytes);

}  // namespace weft
