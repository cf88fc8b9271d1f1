// JSON Schema -> GBNF (see the header for what is covered). Rules are emitted by name, each
// schema node's rule named after its path (root, root-name, root-name-item ...), with llama.cpp's
// primitive rules (space, string, number ...) added once when used.
#include "model/json_schema_grammar.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <vector>

namespace weft::model {

using json = nlohmann::ordered_json;

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02X}", c);
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

namespace {

// llama.cpp's whitespace between tokens: nothing, one space, or up to two newlines and an indent.
constexpr const char* kSpace = R"(| " " | "\n"{1,2} [ \t]{0,20})";
constexpr int32_t kMaxRepeat = 2000;  // the grammar parser's repetition limit
constexpr int32_t kMaxDepth = 64;     // schema nesting
constexpr size_t kMaxRules = 20000;
constexpr int64_t kMaxIntBound = 999'999'999'999'999;  // 15 digits: no overflow when negated

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};

const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> p = {
      {"space", kSpace, {}},
      {"boolean", R"(("true" | "false") space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      {"number",
       R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)",
       {"integral-part", "decimal-part", "space"}},
      {"integer", R"(("-"? integral-part) space)", {"integral-part", "space"}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      {"value",
       R"(object | array | string | number | boolean | null)",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)",
       {"string", "value", "space"}},
      {"array", R"("[" space ( value ("," space value)* )? "]" space)", {"value", "space"}},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)",
       {"space"}},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}},
      {"time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"date-string", R"("\"" date "\"" space)", {"date", "space"}},
      {"time-string", R"("\"" time "\"" space)", {"time", "space"}},
      {"date-time-string", R"("\"" date-time "\"" space)", {"date-time", "space"}},
  };
  return p;
}

// Keywords that only annotate: ignored.
const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {"title",       "description", "default",    "examples", "$schema",
                                          "$id",         "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "definitions", "$defs",       "strict",     "name"};
  return a;
}

// Keywords this converter enforces.
const std::set<std::string>& enforced() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "format",
                                          "$ref"};
  return k;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// GBNF for the decimal strings of the integers in [lo, hi], both non-negative, same digit count.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  if (lo == hi) return gbnf_literal(lo);
  if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " (" + same_length_range(lo.substr(1), hi.substr(1)) + ")";
  size_t rest = lo.size() - 1;
  std::string any_rest = rest ? fmt::format(" [0-9]{{{}}}", rest) : "";
  std::vector<std::string> alts;
  alts.push_back(gbnf_literal(lo.substr(0, 1)) +
                 (rest ? " (" + same_length_range(lo.substr(1), std::string(rest, '9')) + ")" : ""));
  if (lo[0] + 1 <= hi[0] - 1)
    alts.push_back(fmt::format("[{}-{}]", static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)) + any_rest);
  alts.push_back(gbnf_literal(hi.substr(0, 1)) +
                 (rest ? " (" + same_length_range(std::string(rest, '0'), hi.substr(1)) + ")" : ""));
  return join(alts, " | ");
}

// The integers in [lo, hi], 0 <= lo <= hi, without leading zeros.
std::string nonneg_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  std::string l = std::to_string(lo), h = std::to_string(hi);
  for (size_t d = l.size(); d <= h.size(); ++d) {
    std::string from = l;
    if (d != l.size()) from.assign(d, '0'), from[0] = '1';  // 10...0
    std::string to = d == h.size() ? h : std::string(d, '9');
    alts.push_back(fmt::format("({})", same_length_range(from, to)));
  }
  return join(alts, " | ");
}

// The integers >= lo (lo >= 0): numbers of lo's length from lo, and every longer one (up to 16
// digits, as llama.cpp's integral-part).
std::string nonneg_at_least(int64_t lo) {
  std::string l = std::to_string(lo);
  std::string out = fmt::format("({})", same_length_range(l, std::string(l.size(), '9')));
  if (l.size() < 16) out += fmt::format(" | [1-9] [0-9]{{{},15}}", l.size());
  return out;
}

class Converter {
 public:
  // Rules go into `rules`, shared with the other schemas of the same grammar (a body already
  // there under a name is reused, a taken name made unique).
  Converter(const json& root, std::map<std::string, std::string>& rules) : root_(root), rules_(rules) {}

  // Converts the schema into rules, the schema's own one named `name`.
  void run(const std::string& name) {
    std::string top = visit(root_, name, "", 0);
    if (top != name && add(name, top) != name) fail("json_schema", "rule name '{}' is taken", name);
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(const std::string& at, fmt::format_string<Args...> f, Args&&... args) const {
    fail("json_schema", "{} at {}", fmt::format(f, std::forward<Args>(args)...), at.empty() ? "/" : at);
  }

  static std::string sanitize(const std::string& name) {
    std::string out;
    for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    return out.empty() ? "r" : out;
  }

  // Adds rule `name` (made unique if another body holds it); returns its name.
  std::string add(const std::string& wanted, const std::string& body) {
    std::string base = sanitize(wanted), name = base;
    for (int i = 1;; ++i) {
      auto it = rules_.find(name);
      if (it == rules_.end()) break;
      if (it->second == body) return name;
      name = fmt::format("{}{}", base, i);
    }
    if (rules_.size() >= kMaxRules) fail("json_schema", "schema needs more than {} grammar rules", kMaxRules);
    rules_.emplace(name, body);
    return name;
  }

  std::string primitive(const std::string& name) {
    for (const Primitive& p : primitives()) {
      if (p.name != name) continue;
      if (!rules_.count(name)) {
        rules_.emplace(name, p.body);
        for (const char* d : p.deps) primitive(d);
      }
      return name;
    }
    fail("json_schema", "internal: no primitive '{}'", name);
  }

  int32_t count(const json& s, const char* key, const std::string& at, int32_t fallback) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      error(at + "/" + key, "'{}' must be a non-negative integer", key);
    if (v.get<int64_t>() > kMaxRepeat) error(at + "/" + key, "'{}' above {} is not enforced", key, kMaxRepeat);
    return static_cast<int32_t>(v.get<int64_t>());
  }

  // item repeated min..max times (max < 0: unbounded), items separated by `sep` if given.
  static std::string repetition(const std::string& item, int32_t min, int32_t max, const std::string& sep) {
    if (max == 0) return "";
    if (sep.empty()) {
      if (max < 0) return fmt::format("{}{{{},}}", item, min);
      return fmt::format("{}{{{},{}}}", item, min, max);
    }
    std::string rest = "(" + sep + " " + item + ")";
    std::string out = item + " " +
                      (max < 0 ? fmt::format("{}{{{},}}", rest, std::max(min - 1, 0))
                               : fmt::format("{}{{{},{}}}", rest, std::max(min - 1, 0), max - 1));
    return min == 0 ? "(" + out + ")?" : out;
  }

  std::string visit(const json& s, const std::string& name, const std::string& at, int32_t depth) {
    if (depth > kMaxDepth) error(at, "schema nested deeper than {}", kMaxDepth);
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(at, "the schema 'false' matches nothing");
      return primitive("value");
    }
    if (!s.is_object()) error(at, "a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items())
      if (!enforced().count(key) && !annotations().count(key))
        error(at + "/" + key, "keyword '{}' is not supported", key);

    if (s.contains("$ref")) return add(name, resolve(s["$ref"], at + "/$ref", depth));
    if (s.contains("oneOf") || s.contains("anyOf")) {
      const char* key = s.contains("oneOf") ? "oneOf" : "anyOf";
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty()) error(at + "/" + key, "'{}' must be a non-empty array", key);
      std::vector<std::string> rules;
      for (size_t i = 0; i < alts.size(); ++i)
        rules.push_back(visit(alts[i], fmt::format("{}-{}", name, i), fmt::format("{}/{}/{}", at, key, i), depth + 1));
      return add(name, join(rules, " | "));
    }
    const json type = s.contains("type") ? s["type"] : json();
    if (type.is_array()) {
      if (type.empty()) error(at + "/type", "'type' is an empty list");
      std::vector<std::string> rules;
      for (size_t i = 0; i < type.size(); ++i) {
        json one = s;
        one["type"] = type[i];
        rules.push_back(visit(one, fmt::format("{}-{}", name, type[i].is_string() ? type[i].get<std::string>() : "t"),
                              at, depth + 1));
      }
      return add(name, join(rules, " | "));
    }
    if (!type.is_null() && !type.is_string()) error(at + "/type", "'type' must be a string or a list of strings");
    std::string t = type.is_string() ? type.get<std::string>() : "";
    static const std::set<std::string> kTypes = {"",       "object",  "array",   "string",
                                                 "number", "integer", "boolean", "null"};
    if (!kTypes.count(t)) error(at + "/type", "unknown type '{}'", t);

    if (s.contains("const")) {
      primitive("space");
      return add(name, gbnf_literal(s["const"].dump()) + " space");
    }
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) error(at + "/enum", "'enum' must be a non-empty array");
      std::vector<std::string> lits;
      for (const json& v : e) lits.push_back(gbnf_literal(v.dump()));
      primitive("space");
      return add(name, "(" + join(lits, " | ") + ") space");
    }
    if ((t.empty() || t == "object") &&
        (s.contains("properties") || (s.contains("additionalProperties") && s["additionalProperties"] != true)))
      return add(name, object_rule(s, name, at, depth));
    if ((t.empty() || t == "object") && s.contains("allOf")) return add(name, all_of(s, name, at, depth));
    if (s.contains("allOf")) error(at + "/allOf", "'allOf' is enforced only for objects");
    if (((t.empty() || t == "array") && (s.contains("items") || s.contains("prefixItems"))) ||
        (t == "array" && (s.contains("minItems") || s.contains("maxItems"))))
      return add(name, array_rule(s, name, at, depth));
    if ((t.empty() || t == "string") && s.contains("format")) {
      const json& f = s["format"];
      std::string fs = f.is_string() ? f.get<std::string>() : "";
      if (fs == "uuid") return add(name, primitive("uuid"));
      if (fs == "date" || fs == "time" || fs == "date-time") return add(name, primitive(fs + "-string"));
      error(at + "/format", "format '{}' is not supported (date, time, date-time, uuid are)",
            f.is_string() ? fs : f.dump());
    }
    if ((t.empty() || t == "string") && (s.contains("minLength") || s.contains("maxLength"))) {
      int32_t min = count(s, "minLength", at, 0), max = count(s, "maxLength", at, -1);
      if (max >= 0 && max < min) error(at + "/maxLength", "maxLength is below minLength");
      primitive("char");
      primitive("space");
      return add(name, "\"\\\"\" " + repetition("char", min, max, "") + " \"\\\"\" space");
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k) && t != "integer") error(at + "/" + k, "'{}' is enforced only for type integer", k);
    if (t == "integer" && (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                           s.contains("exclusiveMaximum"))) {
      primitive("space");
      return add(name, "(" + integer_range(s, at) + ") space");
    }
    if (t.empty() && !s.contains("properties")) {
      // No type and nothing that constrains: any value. (Keywords of other types were checked above.)
      return add(name, primitive(s.contains("additionalProperties") ? "object" : "value"));
    }
    return add(name, primitive(t));
  }

  std::string resolve(const json& ref, const std::string& at, int32_t depth) {
    if (!ref.is_string()) error(at, "'$ref' must be a string");
    std::string r = ref.get<std::string>();
    if (r.rfind("#/definitions/", 0) != 0 && r.rfind("#/$defs/", 0) != 0)
      error(at, "$ref '{}' is not local (only #/definitions/... and #/$defs/... are)", r);
    std::string rule = sanitize("ref-" + r.substr(2));
    if (resolved_.count(r)) return resolved_[r];
    const json* target = nullptr;
    try {
      target = &root_.at(json::json_pointer(r.substr(1)));
    } catch (const std::exception&) {
      error(at, "$ref '{}' names nothing in the schema", r);
    }
    // Named before it is visited, so a recursive reference finds the rule.
    rule = add(rule, "\"\" # pending " + r);
    resolved_[r] = rule;
    std::string body_rule = visit(*target, rule + "-body", r.substr(1), depth + 1);
    rules_[rule] = body_rule;
    return rule;
  }

  std::string kv_rule(const std::string& key, const std::string& value_rule, const std::string& name) {
    primitive("space");
    return add(name + "-kv", gbnf_literal(json(key).dump()) + " space \":\" space " + value_rule);
  }

  std::string build_object(const std::vector<std::pair<std::string, const json*>>& props,
                           const std::set<std::string>& required, const json* additional, const std::string& name,
                           const std::string& at, int32_t depth) {
    std::vector<std::string> req, opt;
    std::vector<std::string> names;
    for (const auto& [key, schema] : props) {
      std::string v = visit(*schema, name + "-" + key, at + "/properties/" + key, depth + 1);
      (required.count(key) ? req : opt).push_back(kv_rule(key, v, name + "-" + key));
      names.push_back(key);
    }
    for (const std::string& r : required)
      if (std::find(names.begin(), names.end(), r) == names.end())
        error(at + "/required", "required property '{}' has no schema in 'properties'", r);
    bool extra = additional && !(additional->is_boolean() && !additional->get<bool>());
    std::string extra_kv;
    if (extra) {
      std::string v = additional->is_boolean()
                          ? primitive("value")
                          : visit(*additional, name + "-additional", at + "/additionalProperties", depth + 1);
      std::string key = names.empty() ? primitive("string") : other_key(names, name + "-additional-k", at);
      extra_kv = add(name + "-additional-kv", key + " \":\" space " + v);
    }
    primitive("space");
    std::string rule = "\"{\" space " + join(req, " \",\" space ");
    // Optional properties in order, each present or not, then any extra ones: alternatives by
    // which optional property comes first, as llama.cpp builds them.
    std::vector<std::string> tail = opt;
    if (extra) tail.push_back(extra_kv + "*");
    if (!tail.empty()) {
      std::vector<std::string> alts;
      for (size_t i = 0; i < tail.size(); ++i) {
        std::string first = tail[i];
        if (first.back() == '*') first = extra_kv + " (\",\" space " + extra_kv + ")*";
        std::string rest;
        for (size_t j = i + 1; j < tail.size(); ++j) {
          bool many = tail[j].back() == '*';
          std::string kv = many ? extra_kv : tail[j];
          rest += " (\",\" space " + kv + ")" + (many ? "*" : "?");
        }
        alts.push_back(first + rest);
      }
      std::string group = "(" + join(alts, " | ") + ")";
      rule += req.empty() ? " " + group + "?" : " (\",\" space " + group + ")?";
    }
    return rule + " \"}\" space";
  }

  // A JSON string key that is none of `names` (additional properties beside named ones): a trie
  // of the names, each node a rule (no nesting limit), leaving it at any point makes another key.
  std::string other_key(const std::vector<std::string>& names, const std::string& name, const std::string& at) {
    for (const std::string& n : names)
      for (unsigned char c : n)
        if (c == '"' || c == '\\' || c < 0x20 || c == 0x7F)
          error(at + "/properties", "property name '{}' needs escapes, not supported beside additionalProperties", n);
    primitive("char");
    primitive("space");
    struct Node {
      std::map<std::string, size_t> children;  // by UTF-8 character
      bool end = false;
    };
    std::vector<Node> nodes(1);
    for (const std::string& n : names) {
      size_t at_node = 0;
      for (size_t i = 0; i < n.size();) {
        unsigned char c = static_cast<unsigned char>(n[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
        std::string ch = n.substr(i, len);
        i += len;
        auto it = nodes[at_node].children.find(ch);
        if (it == nodes[at_node].children.end()) {
          nodes.push_back({});
          it = nodes[at_node].children.emplace(ch, nodes.size() - 1).first;
        }
        at_node = it->second;
      }
      nodes[at_node].end = true;
    }
    std::vector<std::string> rule_of(nodes.size());
    for (size_t i = nodes.size(); i-- > 0;) {
      std::vector<std::string> alts;
      std::string not_class = "[^\"\\\\\\x7F\\x00-\\x1F";
      for (const auto& [ch, child] : nodes[i].children) {
        alts.push_back(gbnf_literal(ch) + " " + rule_of[child]);
        for (char c : ch)
          not_class += (c == ']' || c == '-' || c == '^' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      }
      alts.push_back(not_class + "] char*");
      alts.push_back("[\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) char*");
      if (!nodes[i].end) alts.push_back("\"\"");
      rule_of[i] = add(fmt::format("{}-{}", name, i), join(alts, " | "));
    }
    return add(name, "\"\\\"\" " + rule_of[0] + " \"\\\"\" space");
  }

  std::string object_rule(const json& s, const std::string& name, const std::string& at, int32_t depth) {
    std::vector<std::pair<std::string, const json*>> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) error(at + "/properties", "'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items()) props.emplace_back(k, &v);
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error(at + "/required", "'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) error(at + "/required", "'required' must list strings");
        required.insert(r.get<std::string>());
      }
    }
    const json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    // JSON Schema's default allows additional properties; llama.cpp leaves them out unless asked
    // for. Leaving them out only narrows what is generated, so output still validates.
    return build_object(props, required, additional, name, at, depth);
  }

  std::string all_of(const json& s, const std::string& name, const std::string& at, int32_t depth) {
    const json& parts = s["allOf"];
    if (!parts.is_array()) error(at + "/allOf", "'allOf' must be an array");
    std::vector<std::pair<std::string, const json*>> props;
    std::set<std::string> required;
    for (size_t i = 0; i < parts.size(); ++i) {
      const json* p = &parts[i];
      std::string pat = fmt::format("{}/allOf/{}", at, i);
      if (p->is_object() && p->contains("$ref")) {
        std::string r = (*p)["$ref"].is_string() ? (*p)["$ref"].get<std::string>() : "";
        if (r.rfind("#/", 0) != 0) error(pat, "$ref '{}' is not local", r);
        try {
          p = &root_.at(json::json_pointer(r.substr(1)));
        } catch (const std::exception&) {
          error(pat, "$ref '{}' names nothing in the schema", r);
        }
      }
      if (!p->is_object() || !p->contains("properties"))
        error(pat, "'allOf' is enforced only over objects with properties");
      for (const auto& [k, v] : (*p)["properties"].items()) props.emplace_back(k, &v);
      if (p->contains("required"))
        for (const json& r : (*p)["required"])
          if (r.is_string()) required.insert(r.get<std::string>());
    }
    return build_object(props, required, nullptr, name, at, depth);
  }

  std::string array_rule(const json& s, const std::string& name, const std::string& at, int32_t depth) {
    primitive("space");
    const json* tuple = s.contains("prefixItems")
                            ? &s["prefixItems"]
                            : (s.contains("items") && s["items"].is_array() ? &s["items"] : nullptr);
    if (tuple) {
      if (s.contains("prefixItems") && s.contains("items") && s["items"] != false)
        error(at + "/items", "'items' beside 'prefixItems' is enforced only as false");
      if (s.contains("minItems") || s.contains("maxItems"))
        error(at + "/minItems", "minItems/maxItems with a tuple are not supported");
      std::vector<std::string> parts;
      for (size_t i = 0; i < tuple->size(); ++i)
        parts.push_back(visit((*tuple)[i], fmt::format("{}-tuple-{}", name, i), fmt::format("{}/prefixItems/{}", at, i),
                              depth + 1));
      return "\"[\" space " + join(parts, " \",\" space ") + " \"]\" space";
    }
    std::string item =
        s.contains("items") ? visit(s["items"], name + "-item", at + "/items", depth + 1) : primitive("value");
    int32_t min = count(s, "minItems", at, 0), max = count(s, "maxItems", at, -1);
    if (max >= 0 && max < min) error(at + "/maxItems", "maxItems is below minItems");
    return "\"[\" space " + repetition(item, min, max, "\",\" space") + " \"]\" space";
  }

  int64_t bound(const json& s, const char* key, const std::string& at) {
    const json& v = s[key];
    double d = v.is_number() ? v.get<double>() : 0;
    if (!v.is_number() || d != static_cast<double>(static_cast<int64_t>(d)))
      error(at + "/" + key, "'{}' of an integer must be an integer", key);
    int64_t i = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
    if (i > kMaxIntBound || i < -kMaxIntBound)
      error(at + "/" + key, "'{}' beyond +-{} is not enforced", key, kMaxIntBound);
    return i;
  }

  std::string integer_range(const json& s, const std::string& at) {
    bool has_lo = false, has_hi = false;
    int64_t lo = 0, hi = 0;
    if (s.contains("minimum")) has_lo = true, lo = bound(s, "minimum", at);
    if (s.contains("exclusiveMinimum")) {
      int64_t e = bound(s, "exclusiveMinimum", at) + 1;
      lo = has_lo ? std::max(lo, e) : e;
      has_lo = true;
    }
    if (s.contains("maximum")) has_hi = true, hi = bound(s, "maximum", at);
    if (s.contains("exclusiveMaximum")) {
      int64_t e = bound(s, "exclusiveMaximum", at) - 1;
      hi = has_hi ? std::min(hi, e) : e;
      has_hi = true;
    }
    const std::string any_positive = "[1-9] [0-9]{0,15}";
    if (has_lo && has_hi) {
      if (hi < lo) error(at + "/maximum", "no integer lies between the minimum and the maximum");
      if (hi < 0) return "\"-\" (" + nonneg_range(-hi, -lo) + ")";
      if (lo < 0) return "\"-\" (" + nonneg_range(1, -lo) + ") | " + nonneg_range(0, hi);
      return nonneg_range(lo, hi);
    }
    if (has_lo) {
      if (lo < 0) return "\"-\" (" + nonneg_range(1, -lo) + ") | \"0\" | " + any_positive;
      return nonneg_at_least(lo);
    }
    if (hi < 0) return "\"-\" (" + nonneg_at_least(-hi) + ")";
    return "\"-\" " + any_positive + " | " + nonneg_range(0, hi);
  }

  const json& root_;
  std::map<std::string, std::string>& rules_;
  std::map<std::string, std::string> resolved_;
};

}  // namespace

std::string json_schema_to_grammar(const json& schema) {
  JsonSchemaRules rules;
  rules.add("root", schema);
  return rules.text();
}

void JsonSchemaRules::add(const std::string& name, const json& schema) {
  std::map<std::string, std::string> rules = rules_;  // unchanged when the schema is refused
  Converter(schema, rules).run(name);
  rules_ = std::move(rules);
}

std::string JsonSchemaRules::text() const {
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

std::string json_schema_to_grammar(const std::string& schema_json) {
  json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const std::exception& e) {
    fail("json_schema", "schema is not JSON: {}", e.what());
  }
  return json_schema_to_grammar(schema);
}

}  // namespace weft::model
