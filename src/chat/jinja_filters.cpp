// Jinja2's built-in filters (jinja2/filters.py) that chat templates use, and transformers' tojson
// (json.dumps with ensure_ascii=False and the indent / separators / sort_keys it is given).
// Case changes are ASCII-only: a template's markup is ASCII, and message text passes through.
#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

namespace weft::chat::jinja {
namespace {

using Filter = Value (*)(Interpreter&, const Value&, CallArgs&);

int64_t int_arg(const Value& v, std::string_view what) {
  if (!v.is_int() && !v.is_bool()) raise(std::string(what) + " must be an integer, got " + std::string(v.type_name()));
  return v.as_int();
}

std::string str_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) raise(std::string(what) + " must be a string, got " + std::string(v.type_name()));
  return v.str();
}

// An attribute path "a.b" of an item, as Jinja2's make_attrgetter ("0" indexes).
Value attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t b = 0;
  for (;;) {
    const size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (v.is_undefined()) return v;
    v = digits ? get_item(v, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(v, Value(part));
    if (e == std::string::npos) return v;
    b = e + 1;
  }
}

// A sort key: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(ascii_lower(v.str())) : v;
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  a.check("default", 2, {"default_value", "boolean"});
  const bool boolean = a.get(1, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
  return v;
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  a.check("length", 0);
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value(0);
    case Value::Kind::String: return Value(static_cast<int64_t>(utf8_length(v.str())));
    case Value::Kind::Array: return Value(static_cast<int64_t>(v.list().size()));
    case Value::Kind::Object:
      if (!v.is_namespace()) return Value(static_cast<int64_t>(v.dict().items.size()));
      break;
    default: break;
  }
  raise("object of type '" + std::string(v.type_name()) + "' has no length");
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("join", 2, {"d", "attribute"});
  const std::string sep = to_str(a.get(0, "d", Value("")));
  const Value attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    out += (first ? "" : sep) + to_str(attr.is_undefined() ? item : attribute_of(item, to_str(attr)));
    first = false;
    if (out.size() > in.limits().max_string_bytes) raise("join: the string would be too large");
  }
  return in.make_string(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs& a) {
  a.check("first", 0);
  const List items = iterate(v);
  return items.empty() ? Value::undefined("first: the sequence is empty") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& a) {
  a.check("last", 0);
  const List items = iterate(v);
  return items.empty() ? Value::undefined("last: the sequence is empty") : items.back();
}

Value f_list(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("list", 0);
  List items = iterate(v);
  in.charge(items.size());
  return Value(std::move(items));
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  a.check("items", 0);
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict()) raise("items: expected a mapping, got " + std::string(v.type_name()));
  List out;
  for (const auto& [k, x] : v.dict().items) out.emplace_back(List{k, x}, true);
  return Value(std::move(out));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  a.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) raise("dictsort: expected a mapping, got " + std::string(v.type_name()));
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const std::string by = to_str(a.get(1, "by", Value("key")));
  if (by != "key" && by != "value") raise("dictsort: 'by' must be 'key' or 'value'");
  const bool reverse = a.get(2, "reverse", Value(false)).truthy();
  List out;
  for (const auto& [k, x] : v.dict().items) out.emplace_back(List{k, x}, true);
  const size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(out.begin(), out.end(), [&](const Value& p, const Value& q) {
    const Value x = sort_key(p.list()[pos], cs), y = sort_key(q.list()[pos], cs);
    return reverse ? less(y, x) : less(x, y);
  });
  return Value(std::move(out));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = a.get(0, "reverse", Value(false)).truthy();
  const bool cs = a.get(1, "case_sensitive", Value(false)).truthy();
  const Value attr = a.get(2, "attribute");
  List items = iterate(v);
  in.charge(items.size() * 8);
  auto key = [&](const Value& x) { return sort_key(attr.is_undefined() ? x : attribute_of(x, to_str(attr)), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& p, const Value& q) {
    return reverse ? less(key(q), key(p)) : less(key(p), key(q));
  });
  return Value(std::move(items));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("unique", 2, {"case_sensitive", "attribute"});
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const Value attr = a.get(1, "attribute");
  List out, seen;
  for (const Value& x : iterate(v)) {
    const Value k = sort_key(attr.is_undefined() ? x : attribute_of(x, to_str(attr)), cs);
    in.charge(seen.size() + 1);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("reverse", 0);
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return Value(std::move(items));
  std::string out;
  for (const Value& c : items) out += c.str();
  return in.make_string(std::move(out));
}

// map / select / reject / selectattr / rejectattr share the walk.
Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return Value(std::move(out));  // Jinja2 maps nothing over a false value (none, [])
  const Value attr = a.get(99, "attribute");
  if (!attr.is_undefined()) {
    const Value dflt = a.get(99, "default");
    for (const Value& x : iterate(v)) {
      Value y = attribute_of(x, to_str(attr));
      out.push_back(y.is_undefined() && !dflt.is_undefined() ? dflt : y);
    }
    return Value(std::move(out));
  }
  if (a.args.empty()) raise("map: give a filter name or attribute=");
  const std::string name = str_arg(a.args[0], "map's filter name");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& x : iterate(v)) {
    CallArgs each = rest;
    out.push_back(apply_filter(in, name, x, each));
  }
  return Value(std::move(out));
}

Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool keep, bool by_attr) {
  List out;
  if (!v.truthy()) return Value(std::move(out));  // as map: none selects nothing
  size_t first_test_arg = 0;
  std::string attr;
  if (by_attr) {
    if (a.args.empty()) raise("selectattr/rejectattr need an attribute name");
    attr = to_str(a.args[0]);
    first_test_arg = 1;
  }
  const bool has_test = a.args.size() > first_test_arg;
  const std::string test = has_test ? str_arg(a.args[first_test_arg], "the test name") : "";
  CallArgs rest;
  if (has_test) rest.args.assign(a.args.begin() + static_cast<ptrdiff_t>(first_test_arg) + 1, a.args.end());
  for (const Value& x : iterate(v)) {
    const Value subject = by_attr ? attribute_of(x, attr) : x;
    CallArgs each = rest;
    const bool pass = has_test ? apply_test(in, test, subject, each) : subject.truthy();
    if (pass == keep) out.push_back(x);
  }
  return Value(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  const bool ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
  const Value indent_v = a.get(1, "indent", Value::none());
  const int indent =
      indent_v.is_none() ? -1 : static_cast<int>(std::clamp<int64_t>(int_arg(indent_v, "indent"), 0, 64));
  std::string item_sep = indent < 0 ? ", " : ",", key_sep = ": ";
  const Value seps = a.get(2, "separators", Value::none());
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.list().size() != 2) raise("tojson: separators must be a pair of strings");
    item_sep = str_arg(seps.list()[0], "separators[0]");
    key_sep = str_arg(seps.list()[1], "separators[1]");
  }
  std::string out = to_json(v, indent, item_sep, key_sep, a.get(3, "sort_keys", Value(false)).truthy());
  if (ensure_ascii) out = escape_non_ascii(out);
  return in.make_string(std::move(out));
}

Value f_trim(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("trim", 1, {"chars"});
  const Value chars = a.get(0, "chars", Value::none());
  return in.make_string(py_strip(to_str(v), chars.is_none() ? nullptr : &chars.str(), true, true));
}

Value f_upper(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("upper", 0);
  return in.make_string(ascii_upper(to_str(v)));
}

Value f_lower(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("lower", 0);
  return in.make_string(ascii_lower(to_str(v)));
}

Value f_capitalize(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("capitalize", 0);
  return in.make_string(capitalize(to_str(v)));
}

// Jinja2's title: each word's first letter upper and the rest lower, words split at whitespace,
// '-', and opening brackets.
Value f_title(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("title", 0);
  std::string s = to_str(v);
  bool word_start = true;
  for (char& c : s) {
    if (std::string_view(" \t\n\r\f\v-({[<").find(c) != std::string_view::npos) {
      word_start = true;
      continue;
    }
    c = word_start ? ascii_upper(c) : ascii_lower(c);
    word_start = false;
  }
  return in.make_string(std::move(s));
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("replace", 3, {"old", "new", "count"});
  const Value count = a.get(2, "count", Value::none());
  return in.make_string(py_replace(to_str(v), to_str(a.get(0, "old")), to_str(a.get(1, "new")),
                                   count.is_none() ? -1 : int_arg(count, "count"), in.limits().max_string_bytes));
}

Value f_string(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("string", 0);
  return in.make_string(to_str(v));
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  a.check("int", 2, {"default", "base"});
  const Value dflt = a.get(0, "default", Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return dflt;
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), nullptr, true, true);
    const int base = static_cast<int>(a.get(1, "base", Value(10)).as_int());
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
    end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value(static_cast<int64_t>(d));
  }
  return dflt;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  a.check("float", 1, {"default"});
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const std::string s = py_strip(v.str(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(d);
  }
  return a.get(0, "default", Value(0.0));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  a.check("abs", 0);
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) raise("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  raise("abs: expected a number, got " + std::string(v.type_name()));
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  a.check("round", 2, {"precision", "method"});
  if (!v.is_number()) raise("round: expected a number, got " + std::string(v.type_name()));
  const int64_t precision = std::clamp<int64_t>(int_arg(a.get(0, "precision", Value(0)), "precision"), -15, 15);
  const std::string method = to_str(a.get(1, "method", Value("common")));
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  double r;
  if (method == "common")
    r = std::nearbyint(x);  // Python's round(): halves to even

  else if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else
    raise("round: method must be common, ceil or floor");
  return Value(r / scale);
}

Value f_sum(Interpreter&, const Value& v, CallArgs& a) {
  a.check("sum", 2, {"attribute", "start"});
  const Value attr = a.get(0, "attribute");
  Value total = a.get(1, "start", Value(0));
  for (const Value& x : iterate(v)) {
    const Value y = attr.is_undefined() ? x : attribute_of(x, to_str(attr));
    if (!y.is_number() || !total.is_number()) raise("sum: items must be numbers");
    if (y.is_float() || total.is_float())
      total = Value(total.as_float() + y.as_float());
    else
      total = Value(total.as_int() + y.as_int());
  }
  return total;
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  a.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const Value attr = a.get(1, "attribute");
  const List items = iterate(v);
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  auto key = [&](const Value& x) { return sort_key(attr.is_undefined() ? x : attribute_of(x, to_str(attr)), cs); };
  Value best = items[0];
  for (const Value& x : items)
    if (want_max ? less(key(best), key(x)) : less(key(x), key(best))) best = x;
  return best;
}

Value f_max(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, true); }
Value f_min(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, false); }

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("indent", 3, {"width", "first", "blank"});
  const Value w = a.get(0, "width", Value(4));
  const std::string pad =
      w.is_string() ? w.str()
                    : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(w, "width"), 0, 1024)), ' ');
  const bool first = a.get(1, "first", Value(false)).truthy();
  const bool blank = a.get(2, "blank", Value(false)).truthy();
  const std::string s = to_str(v);
  std::string out;
  size_t b = 0;
  for (bool is_first = true;; is_first = false) {
    const size_t e = s.find('\n', b);
    const std::string_view line(s.data() + b, (e == std::string::npos ? s.size() : e) - b);
    const bool blank_line = py_strip(std::string(line), nullptr, true, true).empty();
    if ((is_first ? first : true) && (blank || !blank_line)) out += pad;
    out += line;
    if (e == std::string::npos) break;
    out += '\n';
    b = e + 1;
    if (out.size() > in.limits().max_string_bytes) raise("indent: the string would be too large");
  }
  return in.make_string(std::move(out));
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("center", 1, {"width"});
  const std::string s = to_str(v);
  const int64_t width = std::min<int64_t>(int_arg(a.get(0, "width", Value(80)), "width"), 1 << 20);
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return in.make_string(s);
  // Python's str.center: the odd space goes left when the string's length is odd... as CPython.
  const int64_t total = width - len;
  const int64_t left = total / 2 + (total & width & 1);
  return in.make_string(std::string(static_cast<size_t>(left), ' ') + s +
                        std::string(static_cast<size_t>(total - left), ' '));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  a.check("wordcount", 0);
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : to_str(v)) {
    const bool word = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value(n);
}

Value f_safe(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("safe", 0);
  return v.is_markup() ? v : Value::markup(in.make_string(to_str(v)).str());
}

// escape leaves markup as it is; forceescape escapes it again.
Value f_escape(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("escape", 0);
  return v.is_markup() ? v : Value::markup(in.make_string(html_escape(to_str(v))).str());
}

Value f_forceescape(Interpreter& in, const Value& v, CallArgs& a) {
  a.check("forceescape", 0);
  return Value::markup(in.make_string(html_escape(to_str(v))).str());
}

Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
  a.check("attr", 1, {"name"});
  return get_attr(v, to_str(a.get(0, "name")));
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  return in.make_string(printf_format(str_arg(v, "format's template"), a.args, in.limits().max_string_bytes));
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_forceescape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

Value apply_filter(Interpreter& in, std::string_view name, const Value& v, CallArgs& args) {
  const auto& table = filters();
  const auto it = table.find(name);
  if (it == table.end()) raise("no filter named '" + std::string(name) + "'");
  in.charge(1);
  return it->second(in, v, args);
}

}  // namespace weft::chat::jinja
