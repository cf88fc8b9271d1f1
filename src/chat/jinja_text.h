// Python's string operations as the filters and string methods need them: strip, split,
// replace, case changes (ASCII letters only), %-formatting and str.format, and JSON's \u escapes.
#pragma once

#include "chat/jinja_value.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::chat::jinja {

char ascii_lower(char c);
char ascii_upper(char c);
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
std::string capitalize(std::string s);  // str.capitalize: first upper, the rest lower
std::string py_title(std::string s);    // str.title: upper after any non-letter

// str.strip / lstrip / rstrip: `chars` null strips whitespace.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
// str.split / rsplit: `sep` null splits at whitespace runs; maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right);
// str.replace; count < 0 replaces all. Raises past max_bytes.
std::string py_replace(const std::string& s, const std::string& old, const std::string& by, int64_t count,
                       size_t max_bytes);
// "fmt" % args: %s %r %d %i %f %e %g %x %o %c %% with flags, width and precision.
std::string printf_format(const std::string& fmt, const std::vector<Value>& args, size_t max_bytes);
// str.format: {} {0} {name} and {{ }}; a format spec after ':' supports what printf_format does.
std::string str_format(const std::string& fmt, const std::vector<Value>& args,
                       const std::vector<std::pair<std::string, Value>>& kwargs, size_t max_bytes);
// JSON text with every non-ASCII character written as \uXXXX (surrogate pairs above U+FFFF), as
// json.dumps(ensure_ascii=True).
std::string escape_non_ascii(const std::string& json);

}  // namespace weft::chat::jinja
