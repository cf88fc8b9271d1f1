// Values to JSON text as Python's json.dumps writes it (transformers' tojson filter), and JSON
// data to values.
#include "chat/jinja_json.h"

#include "chat/jinja_builtins.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace weft::chat::jinja {
namespace {

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  int indent;
  std::string_view item_sep, key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  }

  // A dict key as json.dumps turns it into a string.
  static std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String: return k.str();
      case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
      case Value::Kind::None: return "null";
      case Value::Kind::Int: return std::to_string(k.as_int());
      case Value::Kind::Float: return float_repr(k.as_float());
      default: raise("keys must be str, int, float, bool or None, not " + std::string(k.type_name()));
    }
  }

  void write(const Value& v, int level) {
    if (level > kMaxValueDepth)
      raise("tojson: the value nests deeper than " + std::to_string(kMaxValueDepth) + " levels");
    if (out.size() > kMaxTextBytes) raise("tojson: the text would exceed " + std::to_string(kMaxTextBytes) + " bytes");
    count_step();
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: {
        const double d = v.as_float();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
        return;
      }
      case Value::Kind::String: json_string(out, v.str()); return;
      case Value::Kind::Array: {
        if (v.list().empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < v.list().size(); ++i) {
          if (i) out += item_sep;
          newline(level + 1);
          write(v.list()[i], level + 1);
        }
        newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Object: {
        if (v.is_namespace()) break;
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [k, x] : v.dict().items) items.emplace_back(key_text(k), &x);
        if (items.empty()) {
          out += "{}";
          return;
        }
        if (sort_keys)
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          newline(level + 1);
          json_string(out, items[i].first);
          out += key_sep;
          write(*items[i].second, level + 1);
        }
        newline(level);
        out += '}';
        return;
      }
      default: break;
    }
    raise("Object of type " + std::string(v.type_name()) + " is not JSON serializable");
  }
};

Value convert(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth) fail("chat", "JSON nests deeper than {} levels", kMaxValueDepth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u > static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<double>(u)) : Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List out;
      out.reserve(j.size());
      for (const auto& x : j) out.push_back(convert(x, depth + 1));
      return Value(std::move(out));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, x] : j.items()) d.items.emplace_back(Value(k), convert(x, depth + 1));
      return Value(std::move(d));
    }
    default: fail("chat", "JSON value of type {} has no template value", j.type_name());
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys) {
  JsonWriter w{indent, item_sep, key_sep, sort_keys, {}};
  w.write(v, 0);
  return std::move(w.out);
}

Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

}  // namespace weft::chat::jinja
