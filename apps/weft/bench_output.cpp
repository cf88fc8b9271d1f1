#include "apps/weft/bench_output.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>

#ifndef WEFT_BUILD_COMMIT
#define WEFT_BUILD_COMMIT "unknown"
#endif
#ifndef WEFT_BUILD_NUMBER
#define WEFT_BUILD_NUMBER 0
#endif

namespace weft::cli {
namespace {

using T = FieldType;

// /proc/cpuinfo's first "model name", as llama-bench's get_cpu_info reports it on Linux.
const std::string& cpu_info() {
  static const std::string name = [] {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("model name", 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const size_t start = line.find_first_not_of(' ', colon + 1);
      return start == std::string::npos ? std::string() : line.substr(start);
    }
    return std::string();
  }();
  return name;
}

// llama-bench's avg and stdev (the sample standard deviation; 0 for one sample), in double.
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double stdev(const std::vector<double>& v) {
  if (v.size() <= 1) return 0;
  const double m = mean(v);
  double sq = 0;
  for (double x : v) sq += (x - m) * (x - m);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

// The q-th quantile (0..1) of v, nearest rank below; v not empty.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

// --roofline's summary: medians of the tokens' decode and read GiB/s, and of their ratios with
// the 10th and 90th percentiles (a spread that says how steady the pairing was).
struct RoofSummary {
  double decode_gibs, read_gibs, of_read, of_read_p10, of_read_p90;
};
RoofSummary roof_summary(const BenchRecord& r) {
  std::vector<double> ratio;
  for (size_t i = 0; i < r.decode_bps.size(); ++i) ratio.push_back(r.decode_bps[i] / r.read_bps[i]);
  return {quantile(r.decode_bps, 0.5) / 1073741824.0, quantile(r.read_bps, 0.5) / 1073741824.0, quantile(ratio, 0.5),
          quantile(ratio, 0.1), quantile(ratio, 0.9)};
}

std::vector<double> as_double(const std::vector<uint64_t>& v) { return {v.begin(), v.end()}; }

// Each field's value as text, as llama-bench's get_values; typed by format_value.
std::vector<std::string> values(const BenchRecord& r) {
  const std::vector<double> ns = as_double(r.samples_ns), ts = r.samples_ts();
  auto num = [](auto v) { return std::to_string(v); };
  return {WEFT_BUILD_COMMIT,
          num(WEFT_BUILD_NUMBER),
          cpu_info(),
          "",  // gpu_info
          r.backends,
          r.model_filename,
          r.model_type,
          num(r.model_size),
          num(r.model_n_params),
          num(r.n_batch),
          num(r.n_batch),  // n_ubatch: weft computes a batch in one pass
          num(r.n_threads),
          "0x0",  // cpu_mask
          "0",    // cpu_strict
          "50",   // poll (llama-bench's default)
          r.type_k,
          r.type_v,
          "0",  // n_gpu_layers
          r.split_mode,
          "0",  // main_gpu
          "0",  // no_kv_offload
          "0",  // flash_attn
          r.tensor_split,
          "none",  // tensor_buft_overrides
          num(int(r.use_mmap)),
          "0",  // embeddings
          "0",  // no_op_offload
          num(r.n_prompt),
          num(r.n_gen),
          num(r.n_depth),
          r.test_time,
          num(static_cast<uint64_t>(std::llround(mean(ns)))),
          num(static_cast<uint64_t>(std::llround(stdev(ns)))),
          num(mean(ts)),
          num(stdev(ts)),
          r.devices,
          r.wire};
}

nlohmann::ordered_json to_json(const BenchRecord& r) {
  nlohmann::ordered_json j;
  const std::vector<std::string> v = values(r);
  for (size_t i = 0; i < bench_fields().size(); ++i) {
    const Field& f = bench_fields()[i];
    switch (f.type) {
      case T::String: j[f.name] = v[i]; break;
      case T::Bool: j[f.name] = v[i] != "0"; break;
      case T::Int: j[f.name] = std::stoll(v[i]); break;
      case T::Float: j[f.name] = std::stod(v[i]); break;
    }
  }
  j["samples_ns"] = r.samples_ns;
  j["samples_ts"] = r.samples_ts();
  if (!r.decode_bps.empty()) {
    const RoofSummary s = roof_summary(r);
    auto gib = [](std::vector<double> bps) {
      for (double& x : bps) x /= 1073741824.0;
      return bps;
    };
    j["roofline"] = {{"decode_bytes", r.decode_bytes},
                     {"decode_gibs", s.decode_gibs},
                     {"read_gibs", s.read_gibs},
                     {"of_read", s.of_read},
                     {"of_read_p10", s.of_read_p10},
                     {"of_read_p90", s.of_read_p90},
                     {"decode_gibs_samples", gib(r.decode_bps)},
                     {"read_gibs_samples", gib(r.read_bps)}};
  }
  return j;
}

std::string csv_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::vector<double> BenchRecord::samples_ts() const {
  std::vector<double> ts;
  for (uint64_t ns : samples_ns) ts.push_back(1e9 * (n_prompt + n_gen) / static_cast<double>(ns));
  return ts;
}

std::string BenchRecord::test_name() const {
  std::string name = n_prompt > 0 && n_gen > 0 ? fmt::format("pp{}+tg{}", n_prompt, n_gen)
                     : n_prompt > 0            ? fmt::format("pp{}", n_prompt)
                                               : fmt::format("tg{}", n_gen);
  return n_depth > 0 ? name + fmt::format(" @ d{}", n_depth) : name;
}

const std::vector<Field>& bench_fields() {
  static const std::vector<Field> k = {
      {"build_commit", T::String}, {"build_number", T::Int},    {"cpu_info", T::String},
      {"gpu_info", T::String},     {"backends", T::String},     {"model_filename", T::String},
      {"model_type", T::String},   {"model_size", T::Int},      {"model_n_params", T::Int},
      {"n_batch", T::Int},         {"n_ubatch", T::Int},        {"n_threads", T::Int},
      {"cpu_mask", T::String},     {"cpu_strict", T::Bool},     {"poll", T::Int},
      {"type_k", T::String},       {"type_v", T::String},       {"n_gpu_layers", T::Int},
      {"split_mode", T::String},   {"main_gpu", T::Int},        {"no_kv_offload", T::Bool},
      {"flash_attn", T::Bool},     {"tensor_split", T::String}, {"tensor_buft_overrides", T::String},
      {"use_mmap", T::Bool},       {"embeddings", T::Bool},     {"no_op_offload", T::Int},
      {"n_prompt", T::Int},        {"n_gen", T::Int},           {"n_depth", T::Int},
      {"test_time", T::String},    {"avg_ns", T::Int},          {"stddev_ns", T::Int},
      {"avg_ts", T::Float},        {"stddev_ts", T::Float},     {"devices", T::String},
      {"wire", T::String},
  };
  return k;
}

std::string bench_header(const std::string& format) {
  if (format == "json") return "[\n";
  if (format != "csv") return "";
  std::string line;
  for (const Field& f : bench_fields()) {
    if (!line.empty()) line += ',';
    line += f.name;
  }
  return line + "\n";
}

std::string bench_row(const std::string& format, const BenchRecord& r, bool first) {
  if (format == "jsonl") return to_json(r).dump() + "\n";
  if (format == "json") return (first ? "" : ",\n") + to_json(r).dump(2);
  std::string line;
  for (const std::string& v : values(r)) {
    if (!line.empty()) line += ',';
    line += csv_quoted(v);
  }
  return line + "\n";
}

std::string bench_footer(const std::string& format) { return format == "json" ? "\n]\n" : ""; }

std::string bench_markdown(const std::vector<BenchRecord>& records) {
  struct Column {
    std::string header;
    bool left;  // text left-aligned, numbers right
    std::function<std::string(const BenchRecord&)> value;
  };
  std::vector<Column> cols = {
      {"model", true, [](const BenchRecord& r) { return r.model_type; }},
      {"size", false,
       [](const BenchRecord& r) {
         return r.model_size < (1ull << 30) ? fmt::format("{:.2f} MiB", r.model_size / 1048576.0)
                                            : fmt::format("{:.2f} GiB", r.model_size / 1073741824.0);
       }},
      {"params", false,
       [](const BenchRecord& r) {
         return r.model_n_params < 1000000000ull ? fmt::format("{:.2f} M", r.model_n_params / 1e6)
                                                 : fmt::format("{:.2f} B", r.model_n_params / 1e9);
       }},
      {"backend", true, [](const BenchRecord& r) { return r.backends; }},
      {"threads", false, [](const BenchRecord& r) { return std::to_string(r.n_threads); }},
  };
  // Columns llama-bench shows when a value is not its default or differs between tests.
  const std::vector<Column> optional = {
      {"dev", true, [](const BenchRecord& r) { return r.devices; }},
      {"sm", true, [](const BenchRecord& r) { return r.split_mode; }},
      {"ts", true, [](const BenchRecord& r) { return r.tensor_split; }},
      {"n_batch", false, [](const BenchRecord& r) { return std::to_string(r.n_batch); }},
      {"type_k", true, [](const BenchRecord& r) { return r.type_k; }},
      {"type_v", true, [](const BenchRecord& r) { return r.type_v; }},
      {"mmap", false, [](const BenchRecord& r) { return std::to_string(int(r.use_mmap)); }},
      {"wire", true, [](const BenchRecord& r) { return r.wire; }},
  };
  const std::map<std::string, std::string> defaults = {{"sm", "none"},    {"n_batch", "512"}, {"type_k", "f16"},
                                                       {"type_v", "f16"}, {"mmap", "0"},      {"wire", "f32"}};
  for (const Column& c : optional) {
    bool show = false;
    for (const BenchRecord& r : records) {
      const auto d = defaults.find(c.header);
      show |= c.value(r) != c.value(records.front()) || (d != defaults.end() && c.value(r) != d->second);
    }
    if (c.header == "dev" || c.header == "ts") show = records.front().split_mode != "none";
    if (show) cols.push_back(c);
  }
  cols.push_back({"test", false, [](const BenchRecord& r) { return r.test_name(); }});
  cols.push_back({"t/s", false, [](const BenchRecord& r) {
                    const std::vector<double> ts = r.samples_ts();
                    return fmt::format("{:.2f} ± {:.2f}", mean(ts), stdev(ts));
                  }});

  // --roofline's columns where a record has them.
  if (std::any_of(records.begin(), records.end(), [](const BenchRecord& r) { return !r.decode_bps.empty(); })) {
    auto roof = [](std::function<std::string(const RoofSummary&)> f) {
      return [f](const BenchRecord& r) { return r.decode_bps.empty() ? std::string() : f(roof_summary(r)); };
    };
    cols.push_back({"GiB/s", false, roof([](const RoofSummary& s) { return fmt::format("{:.2f}", s.decode_gibs); })});
    cols.push_back(
        {"read GiB/s", false, roof([](const RoofSummary& s) { return fmt::format("{:.2f}", s.read_gibs); })});
    cols.push_back({"of read (p10-p90)", false, roof([](const RoofSummary& s) {
                      return fmt::format("{:.1f}% ({:.0f}-{:.0f})", 100 * s.of_read, 100 * s.of_read_p10,
                                         100 * s.of_read_p90);
                    })});
  }

  std::vector<size_t> width(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    width[c] = cols[c].header.size();
    for (const BenchRecord& r : records) width[c] = std::max(width[c], cols[c].value(r).size());
  }
  auto cell = [&](size_t c, const std::string& s) {
    return cols[c].left ? fmt::format(" {:<{}} |", s, width[c]) : fmt::format(" {:>{}} |", s, width[c]);
  };
  std::string out = "|", rule = "|";
  for (size_t c = 0; c < cols.size(); ++c) {
    out += cell(c, cols[c].header);
    rule += fmt::format(" {}{} |", std::string(width[c] - (cols[c].left ? 0 : 1), '-'), cols[c].left ? "" : ":");
  }
  out += "\n" + rule + "\n";
  for (const BenchRecord& r : records) {
    out += "|";
    for (size_t c = 0; c < cols.size(); ++c) out += cell(c, cols[c].value(r));
    out += "\n";
  }
  return out;
}

}  // namespace weft::cli
