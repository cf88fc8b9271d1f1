#include "gguf/gguf_info.h"

#include "core/error.h"

#include <algorithm>

namespace weft::gguf {
namespace {

// Enough to recognise a vocabulary or a chat template without flooding the terminal.
constexpr size_t kShownArrayEntries = 8;
constexpr size_t kShownStringChars = 80;

std::string quote(const std::string& s, bool show_all) {
  std::string out = "\"";
  const size_t n = show_all ? s.size() : std::min(s.size(), kShownStringChars);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += static_cast<char>(c);  // UTF-8 passes through
    }
  }
  out += "\"";
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Thousands separators: "292,800".
std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

std::string format_type(const Value& v) {
  if (!v.is_array()) return std::string(value_type_name(v.type));
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v.v);
  const size_t n = (a && *a) ? (*a)->size() : 0;
  return fmt::format("{}[{}]", value_type_name(v.elem_type), n);
}

std::string format_value(const Value& v, bool show_all) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v.v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.v)) return fmt::format("{:g}", *d);
  if (const auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v.v)) return quote(*s, show_all);
  const auto* a = std::get_if<std::shared_ptr<Array>>(&v.v);
  if (!a || !*a) return "[]";
  const Array& arr = **a;
  const size_t n = show_all ? arr.size() : std::min(arr.size(), kShownArrayEntries);
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) out += (i ? ", " : "") + format_value(arr[i], show_all);
  if (n < arr.size()) out += fmt::format(", ... ({} more)", arr.size() - n);
  return out + "]";
}

std::string describe(const File& f, bool show_all_values) {
  std::string out = fmt::format(
      "{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at byte {}, file {} bytes\n", f.path(),
      f.version(), f.key_order().size(), f.tensors().size(), f.alignment(), f.data_offset(), grouped(f.file_size()));
  if (f.part_paths().size() > 1) {
    out += fmt::format("split model: {} parts, {} bytes in all (tensors from every part below)\n",
                       f.part_paths().size(), grouped(f.total_size()));
  }

  out += "metadata:\n";
  size_t key_w = 0, type_w = 0;
  for (const auto& k : f.key_order()) {
    key_w = std::max(key_w, k.size());
    type_w = std::max(type_w, format_type(*f.find(k)).size());
  }
  for (const auto& k : f.key_order()) {
    const Value& v = *f.find(k);
    out += fmt::format("  {:<{}}  {:<{}}  {}\n", k, key_w, format_type(v), type_w, format_value(v, show_all_values));
  }

  out += "tensors:\n";
  size_t name_w = 4, shape_w = 5;
  for (const auto& t : f.tensors()) {
    name_w = std::max(name_w, t.name.size());
    shape_w = std::max(shape_w, shape_str(t.shape).size());
  }
  out += fmt::format("  {:<{}}  {:<5}  {:<{}}  {:>14}\n", "name", name_w, "type", "shape", shape_w, "bytes");
  uint64_t params = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    out += fmt::format("  {:<{}}  {:<5}  {:<{}}  {:>14}\n", t.name, name_w, dtype_name(t.type), shape_str(t.shape),
                       shape_w, grouped(t.n_bytes));
    params += static_cast<uint64_t>(t.n_elements());
    bytes += t.n_bytes;
  }
  out += fmt::format("total: {} params, {} bytes ({:.2f} MiB)\n", grouped(params), grouped(bytes),
                     static_cast<double>(bytes) / (1024.0 * 1024.0));
  return out;
}

}  // namespace weft::gguf
