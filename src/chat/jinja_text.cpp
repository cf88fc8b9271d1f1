#include "chat/jinja_text.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace weft::chat::jinja {
namespace {

// Python's str.isspace for ASCII: the C whitespace and the four separators 0x1c..0x1f.
bool py_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

void check_size(const std::string& s, size_t max_bytes) {
  if (s.size() > max_bytes) raise("a string would exceed " + std::to_string(max_bytes) + " bytes");
}

// One %-conversion of `v` with its flags, width and precision (-1: none).
std::string convert(char conv, const Value& v, const std::string& flags, int width, int precision) {
  std::string body;
  char buf[512];
  auto number = [&](const char* what) -> const Value& {
    if (!v.is_number()) raise(std::string(what) + " format needs a number, got " + std::string(v.type_name()));
    return v;
  };
  // Numbers go through snprintf whole (flags such as 0 pad them); text is padded below.
  std::string f(1, '%');
  f += flags;
  if (conv != 's' && conv != 'r' && conv != 'c' && width > 0) f += std::to_string(std::min(width, 200));
  if (precision >= 0) {
    f += '.';
    f += std::to_string(std::min(precision, 60));
  }
  switch (conv) {
    case 's': body = to_str(v); break;
    case 'r': body = repr(v); break;
    case 'd':
    case 'i':
    case 'u': {
      const Value& n = number("%d");
      const long long x = n.is_float() ? static_cast<long long>(n.as_float()) : static_cast<long long>(n.as_int());
      std::snprintf(buf, sizeof buf, (f + "lld").c_str(), x);
      body = buf;
      break;
    }
    case 'x':
    case 'X':
    case 'o': {
      const Value& n = number("%x");
      if (n.is_float()) raise("%x format needs an integer");
      std::snprintf(buf, sizeof buf, (f + "ll" + conv).c_str(), static_cast<long long>(n.as_int()));
      body = buf;
      break;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      const double x = number("%f").as_float();
      if (std::fabs(x) > 1e300 && (conv == 'f' || conv == 'F')) raise("%f of a huge number");
      std::snprintf(buf, sizeof buf, (f + conv).c_str(), x);
      body = buf;
      break;
    }
    case 'c': body = v.is_string() ? v.str() : std::string(1, static_cast<char>(number("%c").as_int())); break;
    default: raise(std::string("unsupported format character '") + conv + "'");
  }
  if (conv == 's' || conv == 'r' || conv == 'c') {
    if (precision >= 0 && body.size() > static_cast<size_t>(precision)) body.resize(static_cast<size_t>(precision));
  }
  if (width > 0 && body.size() < static_cast<size_t>(width)) {
    const std::string pad(static_cast<size_t>(width) - body.size(), ' ');
    body = flags.find('-') != std::string::npos ? body + pad : pad + body;
  }
  return body;
}

// Parses "[flags][width][.precision]conv" at s[i]; returns the conversion character.
char parse_spec(const std::string& s, size_t& i, std::string& flags, int& width, int& precision) {
  while (i < s.size() && std::string_view("-+ 0#").find(s[i]) != std::string_view::npos) flags += s[i++];
  width = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && width < 100000)
    width = width * 10 + (s[i++] - '0');
  precision = -1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    precision = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && precision < 100000)
      precision = precision * 10 + (s[i++] - '0');
  }
  if (i >= s.size()) raise("incomplete format");
  return s[i++];
}

}  // namespace

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }

std::string ascii_lower(std::string s) {
  for (char& c : s) c = ascii_lower(c);
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = ascii_upper(c);
  return s;
}

std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) s[i] = i == 0 ? ascii_upper(s[i]) : ascii_lower(s[i]);
  return s;
}

std::string py_title(std::string s) {
  bool prev_letter = false;
  for (char& c : s) {
    c = prev_letter ? ascii_lower(c) : ascii_upper(c);
    prev_letter = is_letter(c);
  }
  return s;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto strip = [&](char c) { return chars ? chars->find(c) != std::string::npos : py_space(c); };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip(s[b])) ++b;
  if (right)
    while (e > b && strip(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  // Every piece but the last ends at a separator: at most one piece a byte (a separator byte).
  if (s.size() >= kMaxListItems && (maxsplit < 0 || static_cast<uint64_t>(maxsplit) >= kMaxListItems)) {
    size_t n = 0;
    if (sep && !sep->empty())
      for (size_t p = s.find(*sep); p != std::string::npos; p = s.find(*sep, p + sep->size())) ++n;
    else
      for (char c : s) n += py_space(c);
    check_list_size(n + 1);
  }
  std::vector<std::string> out;
  if (sep && sep->empty()) raise("empty separator");
  if (!sep) {  // whitespace runs, no empty pieces
    if (!from_right) {
      size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && py_space(s[i])) ++i;
        if (i >= s.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
          std::string rest = s.substr(i);
          out.push_back(py_strip(rest, nullptr, false, true));
          return out;
        }
        size_t j = i;
        while (j < s.size() && !py_space(s[j])) ++j;
        out.push_back(s.substr(i, j - i));
        i = j;
      }
      return out;
    }
    size_t i = s.size();
    while (i > 0) {
      while (i > 0 && py_space(s[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(py_strip(s.substr(0, i), nullptr, true, false));
        break;
      }
      size_t j = i;
      while (j > 0 && !py_space(s[j - 1])) --j;
      out.push_back(s.substr(j, i - j));
      i = j;
    }
    return {out.rbegin(), out.rend()};
  }
  if (!from_right) {
    size_t b = 0;
    for (;;) {
      const size_t e =
          maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit ? std::string::npos : s.find(*sep, b);
      if (e == std::string::npos) {
        out.push_back(s.substr(b));
        return out;
      }
      out.push_back(s.substr(b, e - b));
      b = e + sep->size();
    }
  }
  size_t e = s.size();
  for (;;) {
    const size_t p = maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit
                         ? std::string::npos
                         : (e < sep->size() ? std::string::npos : s.rfind(*sep, e - sep->size()));
    if (p == std::string::npos) {
      out.push_back(s.substr(0, e));
      break;
    }
    out.push_back(s.substr(p + sep->size(), e - p - sep->size()));
    e = p;
  }
  return {out.rbegin(), out.rend()};
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& by, int64_t count,
                       size_t max_bytes) {
  std::string out;
  if (old.empty()) {  // Python inserts `by` before every character and at the end
    int64_t n = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
      if (count < 0 || n < count) {
        out += by;
        ++n;
      }
      if (i < s.size()) out += s[i];
      check_size(out, max_bytes);
    }
    return out;
  }
  size_t b = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t e = s.find(old, b);
    if (e == std::string::npos) break;
    out.append(s, b, e - b);
    out += by;
    b = e + old.size();
    check_size(out, max_bytes);
  }
  out.append(s, b, std::string::npos);
  check_size(out, max_bytes);
  return out;
}

std::string printf_format(const std::string& fmt, const std::vector<Value>& args, size_t max_bytes) {
  std::string out;
  size_t next = 0;
  // A single dict argument serves %(name)s.
  const Value* mapping = args.size() == 1 && args[0].is_dict() ? &args[0] : nullptr;
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      out += fmt[i++];
      continue;
    }
    ++i;
    if (i < fmt.size() && fmt[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    const Value* arg = nullptr;
    if (i < fmt.size() && fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (!mapping || close == std::string::npos) raise("format: %(name) needs one mapping argument");
      arg = mapping->dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!arg) raise("format: the mapping has no key '" + fmt.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    std::string flags;
    int width, precision;
    const char conv = parse_spec(fmt, i, flags, width, precision);
    if (!arg) {
      if (next >= args.size()) raise("not enough arguments for format string");
      arg = &args[next++];
    }
    out += convert(conv, *arg, flags, width, precision);
    check_size(out, max_bytes);
  }
  if (!mapping && next < args.size()) raise("not all arguments converted during string formatting");
  return out;
}

std::string str_format(const std::string& fmt, const std::vector<Value>& args,
                       const std::vector<std::pair<std::string, Value>>& kwargs, size_t max_bytes) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size();) {
    const char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out += c;
      i += 2;
      continue;
    }
    if (c == '}') raise("single '}' in a format string");
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) raise("single '{' in a format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    const size_t colon = field.find(':');
    const std::string name = field.substr(0, colon);
    const Value* arg = nullptr;
    if (name.empty()) {
      if (auto_index >= args.size()) raise("format: not enough positional arguments");
      arg = &args[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(name[0]))) {
      const size_t k = static_cast<size_t>(std::stoul(name.substr(0, 6)));
      if (k >= args.size()) raise("format: no positional argument " + name);
      arg = &args[k];
    } else {
      for (const auto& [k, v] : kwargs)
        if (k == name) arg = &v;
      if (!arg) raise("format: no argument named '" + name + "'");
    }
    if (colon == std::string::npos || colon + 1 == field.size()) {
      out += to_str(*arg);
    } else {
      std::string spec = field.substr(colon + 1);
      if (!std::isalpha(static_cast<unsigned char>(spec.back())))
        spec += arg->is_string() ? 's' : arg->is_float() ? 'g' : 'd';
      size_t p = 0;
      std::string flags;
      int width, precision;
      const char conv = parse_spec(spec, p, flags, width, precision);
      if (arg->is_string()) flags += '-';  // str.format aligns text left, numbers right
      out += convert(conv, *arg, flags, width, precision);
    }
    check_size(out, max_bytes);
  }
  return out;
}

std::string escape_non_ascii(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size();) {
    const unsigned char c = static_cast<unsigned char>(json[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = n == 1 ? 0xFFFD : c & (0xFF >> (n + 1));
    for (int k = 1; k < n && i + static_cast<size_t>(k) < json.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(json[i + static_cast<size_t>(k)]) & 0x3F);
    i += static_cast<size_t>(n);
    char buf[16];
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  return out;
}

}  // namespace weft::chat::jinja
