// Human-readable summary of a GGUF file for `weft info`.
#pragma once

#include "gguf/gguf_reader.h"

#include <string>

namespace weft::gguf {

// Header line (version, counts, alignment), each metadata key in file order with its type and
// value, then a tensor table (name, type, shape, bytes) and totals (params, bytes).
// Without show_all_values, long strings are cut and arrays show only their first few entries.
std::string describe(const File& f, bool show_all_values);

// One value as describe() prints it: strings quoted and escaped, arrays as [a, b, ...].
std::string format_value(const Value& v, bool show_all_values);
// "u32", "string", "string[512]", "array[2]" (arrays of arrays).
std::string format_type(const Value& v);

}  // namespace weft::gguf
