#include "device/remote/weight_slices.h"

#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "net/content_hash.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace weft::device::remote {

using Kind = parallel::WeightSlice::Kind;

namespace {

bool is_matrix(const gguf::TensorInfo& t) { return t.shape.size() >= 2 && t.n_elements() != t.shape[0]; }
// A stacked tensor (ggml [cols, rows, mats]) is `mats` matrices of `rows` rows; a 2-D one is one.
int64_t n_rows(const gguf::TensorInfo& t) { return t.shape.size() > 1 ? t.shape[1] : 1; }
int64_t n_mats(const gguf::TensorInfo& t) { return t.n_elements() / (t.shape[0] * n_rows(t)); }
parallel::Range mats_of(const SliceSpec& s, const gguf::TensorInfo& t) {
  return s.experts.empty() ? parallel::Range{0, n_mats(t)} : s.experts;
}

}  // namespace

std::vector<SliceSpec> plan_slices(parallel::DeviceGraph& g, const gguf::File& weights) {
  std::vector<SliceSpec> specs;
  std::map<std::tuple<std::string, Kind, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, std::string> seen;
  auto rewrite = [&](parallel::WeightSlice& s) {
    if (s.kind == Kind::None) return;
    const auto& info = weights.tensor(s.tensor);
    const bool matrix = is_matrix(info);
    const bool empty = matrix && s.kind != Kind::Whole && s.range.empty();
    const Kind k = matrix ? s.kind : Kind::Whole;
    const parallel::Range r = k == Kind::Whole ? parallel::Range{} : s.range;
    const int64_t stride = k == Kind::Whole ? 0 : s.stride, repeats = k == Kind::Whole ? 1 : s.repeats;
    const auto key = std::make_tuple(s.tensor, k, r.begin, r.end, s.experts.begin, s.experts.end, stride, repeats);
    auto [it, fresh] = seen.emplace(key, fmt::format("s{}", specs.size()));
    if (fresh) specs.push_back({it->second, s.tensor, k, r, empty, s.experts, stride, repeats});
    s.tensor = it->second;
    if (matrix && !empty) s.kind = Kind::Whole, s.stride = 0, s.repeats = 1;
    if (empty) s.range = {0, 0}, s.stride = 0, s.repeats = 1;  // its begin indexed the original tensor
    s.experts = {};                                            // the cut tensor holds just these experts
  };
  for (auto& n : g.nodes) {
    rewrite(n.weight);
    rewrite(n.bias);
  }
  return specs;
}

void unplan_slices(parallel::DeviceGraph& g, const std::vector<SliceSpec>& specs, const gguf::File& model) {
  std::map<std::string, const SliceSpec*> by_name;
  for (const auto& s : specs) {
    const gguf::TensorInfo* src = model.find_tensor(s.source);
    if (!src) fail("net", "slice {}: the model has no tensor '{}'", s.name, s.source);
    check_slice(s, *src);
    by_name[s.name] = &s;
  }
  auto restore = [&](parallel::WeightSlice& w) {
    if (w.kind == Kind::None) return;
    const auto it = by_name.find(w.tensor);
    if (it == by_name.end()) fail("net", "the graph reads weight '{}', which no slice provides", w.tensor);
    const SliceSpec& s = *it->second;
    w.tensor = s.source;
    if (s.kind != Kind::Whole)  // a cut matrix: its runs in the source
      w.kind = s.kind, w.range = s.range, w.stride = s.stride, w.repeats = s.repeats;
    w.experts = s.experts;
  };
  for (auto& n : g.nodes) {
    restore(n.weight);
    restore(n.bias);
  }
}

void check_slice(const SliceSpec& s, const gguf::TensorInfo& src) {
  const int64_t mats = n_mats(src);
  if (!s.experts.empty() && (s.experts.begin < 0 || s.experts.end > mats))
    fail("net", "slice {} of '{}': experts [{}, {}) outside 0..{}", s.name, s.source, s.experts.begin, s.experts.end,
         mats);
  if (s.kind == Kind::Whole) {
    if (s.empty) fail("net", "slice {} of '{}': a whole tensor cannot be empty", s.name, s.source);
    return;
  }
  if (s.kind != Kind::Rows && s.kind != Kind::Cols) fail("net", "slice {} of '{}': bad kind", s.name, s.source);
  if (!is_matrix(src)) fail("net", "slice {}: '{}' is not a matrix", s.name, s.source);
  const int64_t dim = s.kind == Kind::Rows ? n_rows(src) : src.shape[0];
  if (s.repeats < 1 || s.repeats > dim || s.stride < 0 || (s.repeats > 1 && s.stride < s.range.size()))
    fail("net", "slice {} of '{}': {} runs {} apart", s.name, s.source, s.repeats, s.stride);
  const int64_t last_end = s.range.end + (s.repeats - 1) * s.stride;
  if (s.range.begin < 0 || s.range.end < s.range.begin || last_end > dim)
    fail("net", "slice {} of '{}': range [{}, {}) x {} outside 0..{}", s.name, s.source, s.range.begin, s.range.end,
         s.repeats, dim);
  if (s.empty != s.range.empty())
    fail("net", "slice {} of '{}': empty flag disagrees with its range", s.name, s.source);
  const int64_t bs = block_size(src.type);
  if (s.kind == Kind::Cols && (s.range.begin % bs || s.range.end % bs || s.stride % bs))
    fail("net", "slice {} of '{}': columns [{}, {}) are not whole blocks of {}", s.name, s.source, s.range.begin,
         s.range.end, bs);
}

TensorHeader slice_header(const SliceSpec& s, const gguf::TensorInfo& src) {
  TensorHeader h{s.name, src.type, src.shape, src.n_bytes};
  const parallel::Range mats = mats_of(s, src);
  if (s.kind == Kind::Whole && mats.size() == n_mats(src)) return h;
  const int64_t rows = n_rows(src);
  h.shape = {src.shape[0], rows};
  if (s.kind == Kind::Rows) h.shape[1] = s.empty ? 1 : s.range.size() * s.repeats;
  if (s.kind == Kind::Cols) h.shape[0] = s.empty ? block_size(src.type) : s.range.size() * s.repeats;
  if (src.shape.size() > 2) h.shape.push_back(mats.size());
  h.n_bytes = row_bytes(h.type, h.shape[0]) * h.shape[1] * mats.size();
  return h;
}

void for_each_piece(const SliceSpec& s, const gguf::TensorInfo& src,
                    const std::function<void(const uint8_t* p, size_t n)>& out) {
  const int64_t cols = src.shape[0], rows = n_rows(src);
  const size_t stride = row_bytes(src.type, cols);
  if (s.empty) {
    const std::vector<uint8_t> zeros(s.kind == Kind::Rows ? stride : row_bytes(src.type, block_size(src.type)) * rows);
    out(zeros.data(), zeros.size());
    return;
  }
  const parallel::Range mats = mats_of(s, src);
  const std::vector<parallel::Range> runs = parallel::slice_runs(s.range, s.stride, s.repeats);
  for (int64_t e = mats.begin; e < mats.end; ++e) {  // each matrix's part, one after another
    const uint8_t* m = src.data + stride * rows * e;
    if (s.kind == Kind::Rows) {
      for (const parallel::Range& run : runs) out(m + stride * run.begin, stride * run.size());
    } else if (s.kind == Kind::Cols) {
      for (int64_t r = 0; r < rows; ++r)
        for (const parallel::Range& run : runs)
          out(m + stride * r + row_bytes(src.type, run.begin), row_bytes(src.type, run.size()));
    } else {
      out(m, stride * rows);
    }
  }
}

SliceImage::SliceImage(const std::vector<TensorHeader>& headers) {
  gguf::Writer w;
  for (const auto& h : headers)  // the data is placed by the caller: layout() never fills
    w.add_tensor(h.name, h.type, h.shape, [](uint8_t*, size_t) { WEFT_ASSERT(!"a slice image is never filled"); });
  gguf::Writer::Layout l = w.layout();
  offsets_ = std::move(l.offsets);
  image_ = HugeBuffer(l.size, "net", "weights");  // the device reads the weights from here every step
  std::copy(l.head.begin(), l.head.end(), image_.data());
}

std::string slices_key(const ModelId& model, const std::vector<SliceSpec>& specs) {
  net::ByteWriter w;
  w.str("weft-slices/3");  // bump when the slice layout changes, so old cache entries stop matching
  write_model_id(w, {model.size, model.sha256, ""});
  write_slices(w, specs);
  return net::sha256_hex(w.data());
}

void write_model_id(net::ByteWriter& w, const ModelId& m) {
  w.u64(m.size);
  w.str(m.sha256);
  w.str(m.file_name);
}

ModelId read_model_id(net::ByteReader& r) {
  ModelId m;
  m.size = r.u64("model size");
  m.sha256 = r.str("model hash", net::kSha256HexChars);
  if (!m.sha256.empty() &&
      (m.sha256.size() != net::kSha256HexChars || m.sha256.find_first_not_of("0123456789abcdef") != std::string::npos))
    fail("net", "model hash '{}' is not a SHA-256 in hex", m.sha256);
  m.file_name = r.str("model file name", kMaxNameBytes);
  return m;
}

void write_slices(net::ByteWriter& w, const std::vector<SliceSpec>& specs) {
  w.u32(static_cast<uint32_t>(specs.size()));
  for (const auto& s : specs) {
    w.str(s.name);
    w.str(s.source);
    w.u8(static_cast<uint8_t>(s.kind));
    w.i64(s.range.begin);
    w.i64(s.range.end);
    w.u8(s.empty);
    w.i64(s.experts.begin);
    w.i64(s.experts.end);
    w.i64(s.stride);
    w.i64(s.repeats);
  }
}

std::vector<SliceSpec> read_slices(net::ByteReader& r) {
  const uint32_t n = r.count("slice count", kMaxTensors, 4 + 4 + 1 + 32 + 1 + 16);
  std::vector<SliceSpec> specs(n);
  for (auto& s : specs) {
    s.name = r.str("slice name", kMaxNameBytes);
    s.source = r.str("slice source", kMaxNameBytes);
    const uint8_t k = r.u8("slice kind");
    if (k > static_cast<uint8_t>(Kind::Cols)) fail("net", "slice {}: kind {} is out of range", s.name, k);
    s.kind = static_cast<Kind>(k);
    s.range = {r.i64("slice begin"), r.i64("slice end")};
    s.empty = r.boolean("slice empty");
    s.experts = {r.i64("slice experts begin"), r.i64("slice experts end")};
    if (s.experts.begin < 0 || s.experts.end < s.experts.begin)
      fail("net", "slice {}: experts [{}, {}) is not a range", s.name, s.experts.begin, s.experts.end);
    s.stride = r.i64("slice stride");
    s.repeats = r.i64("slice repeats");  // checked against its tensor by check_slice
  }
  return specs;
}

}  // namespace weft::device::remote
