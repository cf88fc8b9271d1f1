// The built-ins a template can name: filters (`x | trim`), tests (`x is string`), global
// functions (range, namespace, dict, raise_exception, strftime_now) and the methods of strings,
// lists and dicts (`s.strip()`, `d.items()`), each with Python's / Jinja2's behaviour. They
// raise TemplateError; the interpreter adds the position.
#pragma once

#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

#include <string>
#include <string_view>

namespace weft::chat::jinja {

// Applies filter `name` to `v`; raises for an unknown filter.
Value apply_filter(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
// Applies test `name` to `v`; raises for an unknown test.
bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
// The global functions, for the interpreter's outermost scope.
Dict global_functions(Interpreter& in);
// `self.name` as a bound method when `self`'s kind has that method; undefined otherwise.
Value bound_method(const Value& self, const std::string& name);
// Python's `container.__contains__(item)`.
bool contains(const Value& container, const Value& item);
// JSON text of `v` as Python's json.dumps(v, ensure_ascii=False, indent, separators, sort_keys).
// indent < 0: one line, separators default to ", " and ": "; indent >= 0: one item a line.
std::string to_json(const Value& v, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys);

}  // namespace weft::chat::jinja
