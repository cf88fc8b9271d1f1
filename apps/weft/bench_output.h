// weft bench's results in llama-bench's formats: its field names and JSON types (test::get_fields /
// get_field_type, with the fields llama.cpp's scripts/compare-llama-bench.py reads: use_mmap,
// tensor_buft_overrides, no_op_offload), so that script reads weft's JSON, JSONL and CSV; plus
// weft's own `devices` and `wire`. Markdown is llama-bench's table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::cli {

// One test's configuration and samples: a row of llama-bench's output.
struct BenchRecord {
  std::string model_filename, model_type;
  uint64_t model_size = 0, model_n_params = 0;
  std::string backends = "CPU";  // "RPC" when remote devices take part, as llama-bench says
  int n_batch = 0, n_threads = 0;
  std::string type_k, type_v;
  std::string split_mode;    // none | layer | tensor
  std::string tensor_split;  // "0.50/0.50": each device's share
  bool use_mmap = false;
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string test_time;  // RFC 3339, UTC
  std::vector<uint64_t> samples_ns;
  std::string devices, wire;  // weft's own
  // --roofline (tg tests), per generated token: its weight bytes per second (decode_bytes over its
  // time) and the streaming read's, the mean of the reads just before and after it.
  uint64_t decode_bytes = 0;
  std::vector<double> decode_bps, read_bps;

  std::vector<double> samples_ts() const;
  std::string test_name() const;  // pp512, tg128, pp512+tg128, with " @ d4096"
};

enum class FieldType { String, Bool, Int, Float };
struct Field {
  const char* name;
  FieldType type;
};
// Every field, in llama-bench's order (samples_ns / samples_ts come after, in JSON only).
const std::vector<Field>& bench_fields();

// Printed to stdout as they come (json needs begin/end for its brackets).
std::string bench_header(const std::string& format);  // csv: the field names; json: "["
std::string bench_row(const std::string& format, const BenchRecord& r, bool first);
std::string bench_footer(const std::string& format);  // json: "]"
// Markdown: the columns of llama-bench's table that vary or matter, then one row per record.
std::string bench_markdown(const std::vector<BenchRecord>& records);

}  // namespace weft::cli
