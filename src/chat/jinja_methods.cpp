// Jinja2's tests, the global functions chat templates call (range, namespace, dict,
// raise_exception, strftime_now as transformers provides it), and the Python methods of strings,
// lists and dicts. The methods that would change a list or dict (append, pop, update) are left
// out, as transformers' ImmutableSandboxedEnvironment refuses them.
#include "chat/jinja_builtins.h"
#include "chat/jinja_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <map>

namespace weft::chat::jinja {
namespace {

// ---- tests ----
using Test = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& arg0(CallArgs& a, std::string_view test) {
  if (a.args.empty()) raise("test '" + std::string(test) + "' needs an argument");
  return a.args[0];
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value& d = arg0(a, "divisibleby");
  if (!v.is_number() || !d.is_number()) raise("divisibleby needs numbers");
  if (v.is_float() || d.is_float()) return d.as_float() != 0 && std::fmod(v.as_float(), d.as_float()) == 0;
  if (d.as_int() == 0) raise("divisibleby 0");
  return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
}

bool t_even_odd(const Value& v, bool even) {
  if (!v.is_int() && !v.is_bool()) raise("even/odd need an integer, got " + std::string(v.type_name()));
  return (v.as_int() % 2 == 0) == even;
}

const std::map<std::string, Test, std::less<>>& tests() {
  static const std::map<std::string, Test, std::less<>> table = {
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }},
      // Jinja2 asks iter() and len(): Undefined has both.
      {"iterable", [](Interpreter&, const Value& v,
                      CallArgs&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"sequence", [](Interpreter&, const Value& v,
                      CallArgs&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }},
      {"even", [](Interpreter&, const Value& v, CallArgs&) { return t_even_odd(v, true); }},
      {"odd", [](Interpreter&, const Value& v, CallArgs&) { return t_even_odd(v, false); }},
      {"divisibleby", t_divisibleby},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "eq")); }},
      {"equalto", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "equalto")); }},
      {"==", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, arg0(a, "==")); }},
      {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg0(a, "ne")); }},
      {"!=", [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, arg0(a, "!=")); }},
      {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return less(v, arg0(a, "lt")); }},
      {"lessthan", [](Interpreter&, const Value& v, CallArgs& a) { return less(v, arg0(a, "lessthan")); }},
      {"<", [](Interpreter&, const Value& v, CallArgs& a) { return less(v, arg0(a, "<")); }},
      {"le", [](Interpreter&, const Value& v, CallArgs& a) { return !less(arg0(a, "le"), v); }},
      {"<=", [](Interpreter&, const Value& v, CallArgs& a) { return !less(arg0(a, "<="), v); }},
      {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return less(arg0(a, "gt"), v); }},
      {"greaterthan", [](Interpreter&, const Value& v, CallArgs& a) { return less(arg0(a, "greaterthan"), v); }},
      {">", [](Interpreter&, const Value& v, CallArgs& a) { return less(arg0(a, ">"), v); }},
      {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return !less(v, arg0(a, "ge")); }},
      {">=", [](Interpreter&, const Value& v, CallArgs& a) { return !less(v, arg0(a, ">=")); }},
      {"in", [](Interpreter&, const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); }},
      {"sameas",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& o = arg0(a, "sameas");
         return (v.is_none() && o.is_none()) || (v.is_bool() && o.is_bool() && v.as_bool() == o.as_bool()) ||
                (v.is_list() && o.is_list() && &v.list() == &o.list()) ||
                (v.kind() == Value::Kind::Object && o.kind() == Value::Kind::Object && &v.dict() == &o.dict());
       }},
      {"lower",
       [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && ascii_lower(v.str()) == v.str(); }},
      {"upper",
       [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && ascii_upper(v.str()) == v.str(); }},
      {"escaped", [](Interpreter&, const Value&, CallArgs&) { return false; }},
  };
  return table;
}

// ---- globals ----
class Builtin : public Callable {
 public:
  using Fn = Value (*)(Interpreter&, CallArgs&);
  Builtin(std::string_view name, Fn fn) : name_(name), fn_(fn) {}
  std::string_view name() const override { return name_; }
  Value call(Interpreter& in, CallArgs& a) const override { return fn_(in, a); }

 private:
  std::string_view name_;
  Fn fn_;
};

Value g_range(Interpreter& in, CallArgs& a) {
  a.check("range", 3);
  for (const Value& v : a.args)
    if (!v.is_int() && !v.is_bool()) raise("range() takes integers, got " + std::string(v.type_name()));
  if (a.args.empty()) raise("range() needs an argument");
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  }
  if (step == 0) raise("range() step must not be zero");
  const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
  if (count > static_cast<double>(kMaxListItems))
    raise("range() of " + std::to_string(static_cast<int64_t>(count)) + " items is too large");
  List out;
  if (count > 0) {
    in.charge(4 * static_cast<size_t>(count));
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
  }
  return Value(std::move(out));
}

Dict kwargs_dict(CallArgs& a, std::string_view fn) {
  Dict d;
  if (a.args.size() > 1) raise(std::string(fn) + "() takes at most one positional argument");
  if (!a.args.empty()) {
    if (!a.args[0].is_dict()) raise(std::string(fn) + "() takes a mapping");
    d = a.args[0].dict();
  }
  for (auto& [k, v] : a.kwargs) d.set(Value(k), v);
  return d;
}

Value g_namespace(Interpreter& in, CallArgs& a) {
  Value ns(kwargs_dict(a, "namespace"), /*is_namespace=*/true);
  in.track_namespace(ns);
  return ns;
}

Value g_dict(Interpreter&, CallArgs& a) { return Value(kwargs_dict(a, "dict")); }

Value g_raise_exception(Interpreter&, CallArgs& a) {
  raise("the template raised an exception: " + (a.args.empty() ? std::string() : to_str(a.args[0])));
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
  a.check("strftime_now", 1);
  const std::string fmt = a.args.empty() ? std::string("%Y-%m-%d") : to_str(a.args[0]);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &in.now());
  if (n == 0 && !fmt.empty()) raise("strftime_now: the format gives nothing or too much: '" + fmt + "'");
  return Value(std::string(buf, n));
}

// ---- methods ----
class Method : public Callable {
 public:
  Method(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  Value call(Interpreter& in, CallArgs& a) const override;

 private:
  Value string_method(Interpreter& in, CallArgs& a) const;
  Value self_;
  std::string name_;
};

const std::string* chars_arg(const CallArgs& a, Value& holder) {
  holder = a.get(0, "chars", Value::none());
  if (holder.is_none()) return nullptr;
  if (!holder.is_string()) raise("strip() takes a string");
  return &holder.str();
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& x) {
    if (!x.is_string()) raise("startswith/endswith take a string or a tuple of strings");
    const std::string& p = x.str();
    return p.size() <= s.size() &&
           (prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (affix.is_list()) {
    for (const Value& x : affix.list())
      if (one(x)) return true;
    return false;
  }
  return one(affix);
}

Value Method::string_method(Interpreter& in, CallArgs& a) const {
  const std::string& s = self_.str();
  const std::string& m = name_;
  Value holder;
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return in.make_string(py_strip(s, chars_arg(a, holder), m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit") {
    a.check(m, 2, {"sep", "maxsplit"});
    const Value sep = a.get(0, "sep", Value::none());
    if (!sep.is_none() && !sep.is_string()) raise("split() separator must be a string or none");
    const Value maxsplit = a.get(1, "maxsplit", Value(-1));
    List out;
    for (std::string& piece : py_split(s, sep.is_none() ? nullptr : &sep.str(), maxsplit.as_int(), m == "rsplit"))
      out.emplace_back(std::move(piece));
    in.charge(out.size());
    return Value(std::move(out));
  }
  if (m == "startswith" || m == "endswith") {
    if (a.args.empty()) raise(m + "() needs an argument");
    return Value(affix_match(s, a.args[0], m == "startswith"));
  }
  if (m == "replace") {
    if (a.args.size() < 2) raise("replace() needs old and new");
    return in.make_string(py_replace(s, to_str(a.args[0]), to_str(a.args[1]), a.get(2, "count", Value(-1)).as_int(),
                                     in.limits().max_string_bytes));
  }
  if (m == "upper") return in.make_string(ascii_upper(s));
  if (m == "lower") return in.make_string(ascii_lower(s));
  if (m == "title") return in.make_string(py_title(s));
  if (m == "capitalize") return in.make_string(capitalize(s));
  if (m == "find" || m == "rfind" || m == "index" || m == "count") {
    if (a.args.empty() || !a.args[0].is_string()) raise(m + "() needs a string");
    const std::string& sub = a.args[0].str();
    if (m == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t p = m == "rfind" ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (m == "index") raise("substring not found");
      return Value(-1);
    }
    return Value(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p))));
  }
  if (m == "join") {
    if (a.args.size() != 1) raise("join() takes one iterable");
    std::string out;
    bool first = true;
    for (const Value& x : iterate(a.args[0])) {
      if (!x.is_string()) raise("join() items must be strings, got " + std::string(x.type_name()));
      out += (first ? "" : s) + x.str();
      first = false;
      if (out.size() > in.limits().max_string_bytes) raise("join: the string would be too large");
    }
    return in.make_string(std::move(out));
  }
  if (m == "format") return in.make_string(str_format(s, a.args, a.kwargs, in.limits().max_string_bytes));
  if (m == "splitlines") {
    List out;
    for (std::string& line : py_split(s, &(holder = Value("\n")).str(), -1, false)) out.emplace_back(std::move(line));
    if (!out.empty() && out.back().str().empty()) out.pop_back();
    return Value(std::move(out));
  }
  auto all = [&](auto pred) {
    if (s.empty()) return Value(false);
    for (unsigned char c : s)
      if (!pred(c)) return Value(false);
    return Value(true);
  };
  if (m == "isdigit" || m == "isnumeric" || m == "isdecimal")
    return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (m == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (m == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (m == "isspace") return all([](unsigned char c) { return std::isspace(c) != 0; });
  if (m == "islower") return Value(ascii_lower(s) == s && ascii_upper(s) != s);
  if (m == "isupper") return Value(ascii_upper(s) == s && ascii_lower(s) != s);
  raise("strings have no method '" + m + "'");
}

Value Method::call(Interpreter& in, CallArgs& a) const {
  const std::string& m = name_;
  if (self_.is_string()) return string_method(in, a);
  if (self_.is_dict()) {
    const Dict& d = self_.dict();
    if (m == "get") {
      if (a.args.empty()) raise("get() needs a key");
      const Value* found = d.find(a.args[0]);
      return found ? *found : a.get(1, "default", Value::none());
    }
    List out;
    for (const auto& [k, v] : d.items) {
      if (m == "items") out.emplace_back(List{k, v}, true);
      if (m == "keys") out.push_back(k);
      if (m == "values") out.push_back(v);
    }
    in.charge(out.size());
    return Value(std::move(out));
  }
  if (self_.is_list()) {
    if (a.args.size() != 1) raise(m + "() takes one argument");
    int64_t n = 0, i = 0;
    for (const Value& x : self_.list()) {
      if (equals(x, a.args[0])) {
        if (m == "index") return Value(i);
        ++n;
      }
      ++i;
    }
    if (m == "index") raise("value is not in the list");
    return Value(n);
  }
  raise("no method '" + m + "'");
}

bool is_method(const Value& self, std::string_view name) {
  static constexpr std::string_view kString[] = {
      "strip",      "lstrip",  "rstrip",     "split",     "rsplit",  "startswith", "endswith", "replace", "upper",
      "lower",      "title",   "capitalize", "find",      "rfind",   "index",      "count",    "join",    "format",
      "splitlines", "isdigit", "isnumeric",  "isdecimal", "isalpha", "isalnum",    "isspace",  "islower", "isupper"};
  static constexpr std::string_view kDict[] = {"get", "items", "keys", "values"};
  static constexpr std::string_view kList[] = {"index", "count"};
  auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  if (self.is_string()) return in(kString);
  if (self.is_dict()) return in(kDict);
  if (self.is_list()) return in(kList);
  return false;
}

}  // namespace

bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args) {
  const auto& table = tests();
  const auto it = table.find(name);
  if (it == table.end()) raise("no test named '" + std::string(name) + "'");
  in.charge(1);
  return it->second(in, v, args);
}

Dict global_functions(Interpreter&) {
  Dict d;
  auto add = [&](std::string_view name, Builtin::Fn fn) {
    d.set(Value(name), Value(std::make_shared<Builtin>(name, fn)));
  };
  add("range", g_range);
  add("namespace", g_namespace);
  add("dict", g_dict);
  add("raise_exception", g_raise_exception);
  add("strftime_now", g_strftime_now);
  return d;
}

Value bound_method(const Value& self, const std::string& name) {
  if (!is_method(self, name)) return Value::undefined();
  return Value(std::make_shared<Method>(self, name));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) raise("'in <string>' needs a string on the left, got " + std::string(item.type_name()));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::Array:
      for (const Value& x : container.list())
        if (equals(x, item)) return true;
      return false;
    case Value::Kind::Object:
      if (container.is_namespace()) break;
      return container.dict().find(item) != nullptr;
    default: break;
  }
  raise("argument of type '" + std::string(container.type_name()) + "' is not iterable");
}

}  // namespace weft::chat::jinja
