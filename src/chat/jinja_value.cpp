// Value's construction and the Python semantics every part of the engine shares: truth,
// equality, ordering, str() and repr().
#include "chat/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace weft::chat::jinja {

namespace {
thread_local StepCounter* tl_counter = nullptr;  // the render running on this thread
}  // namespace

void raise(std::string message) { throw TemplateError{std::move(message)}; }

void set_thread_step_counter(StepCounter* c) { tl_counter = c; }

void count_step(size_t n) {
  StepCounter* c = tl_counter;
  if (!c) return;
  c->steps += n;
  if (c->steps > c->max)
    raise("the template ran over " + std::to_string(c->max) +
          " steps (a loop that does not end, or one too large for a chat template)");
}

void check_list_size(size_t n) {
  if (n > kMaxListItems)
    raise("a list of " + std::to_string(n) + " items is too large (at most " + std::to_string(kMaxListItems) + ")");
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.ptr_ = std::make_shared<std::string>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value::Value(std::string s) : kind_(Kind::String), ptr_(std::make_shared<std::string>(std::move(s))) {}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.flag_ = true;
  return v;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value::Value(List l, bool tuple) : kind_(Kind::Array), flag_(tuple), ptr_(std::make_shared<List>(std::move(l))) {}

Value::Value(Dict d, bool is_namespace)
    : kind_(Kind::Object), flag_(is_namespace), ptr_(std::make_shared<Dict>(std::move(d))) {}

const std::string& Value::str() const {
  static const std::string empty;
  return ptr_ && (kind_ == Kind::String || kind_ == Kind::Undefined) ? *static_cast<const std::string*>(ptr_.get())
                                                                     : empty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0;
    case Kind::String: return !str().empty();
    case Kind::Array: return !list().empty();
    case Kind::Object: return flag_ || !dict().items.empty();  // a namespace is an object: true
    case Kind::Function: return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Array: return flag_ ? "tuple" : "list";
    case Kind::Object: return flag_ ? "namespace" : "dict";
    case Kind::Function: return "callable";
  }
  return "?";
}

namespace {

// Every node a recursive walk visits: the depth bounded, and a step counted.
void check_depth(int depth) {
  count_step();
  if (depth > kMaxValueDepth)
    raise("a value nests deeper than " + std::to_string(kMaxValueDepth) + " levels (does it hold itself?)");
}

}  // namespace

bool equals(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::Array: {
      if (&a.list() == &b.list()) return true;  // as Python compares a list with itself
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!equals(a.list()[i], b.list()[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Object: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().find(k);
        if (!other || !equals(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::Function: return &a.callable() == &b.callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i], depth + 1)) return true;
      if (less(y[i], x[i], depth + 1)) return false;
    }
    return x.size() < y.size();
  }
  raise("cannot order " + std::string(a.type_name()) + " and " + std::string(b.type_name()));
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // The shortest digits that round-trip, then Python's layout: positional for exponents in
  // [-4, 16), scientific (two exponent digits at least) outside.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  const int exp = std::stoi(s.substr(e + 1));
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1);
      out += '.';
      out.append(digits, static_cast<size_t>(exp) + 1, std::string::npos);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  // Python quotes with ' unless the text holds ' and no ".
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == q) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

}  // namespace

namespace {

void repr_into(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  if (out.size() > kMaxTextBytes) raise("a value's text would exceed " + std::to_string(kMaxTextBytes) + " bytes");
  switch (v.kind()) {
    case Value::Kind::String: out += repr_string(v.str()); return;
    case Value::Kind::Array: {
      out += v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += ", ";
        repr_into(out, v.list()[i], depth + 1);
      }
      if (v.is_tuple() && v.list().size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return;
    }
    case Value::Kind::Object: {
      if (v.is_namespace()) {
        out += "<Namespace>";
        return;
      }
      out += "{";
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, x, depth + 1);
        first = false;
      }
      out += "}";
      return;
    }
    default: out += to_str(v);
  }
}

}  // namespace

std::string repr(const Value& v, int depth) {
  std::string out;
  repr_into(out, v, depth);
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_float());
    case Value::Kind::String: return v.str();
    case Value::Kind::Function: return "<function " + std::string(v.callable().name()) + ">";
    default: return repr(v);
  }
}

}  // namespace weft::chat::jinja
