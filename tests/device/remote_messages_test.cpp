// Remote session messages on the wire: what the coordinator writes the worker reads back, field by
// field, for every codec in remote_messages.h and weight_slices.h; values a worker must not act on,
// and truncated or extended bytes, are errors naming what is wrong.
#include "device/remote/remote_messages.h"
#include "core/error.h"
#include "device/cpu/cpu_device.h"
#include "device/remote/weight_slices.h"
#include "gguf/gguf_reader.h"
#include "model/llama_graph.h"
#include "model/model_config.h"
#include "net/wire.h"
#include "parallel/planner.h"
#include "support/expect_error.h"
#include "tools/gen_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

namespace weft::device::remote {
namespace {

using Bytes = std::vector<uint8_t>;
using Kind = parallel::WeightSlice::Kind;

LoadOptions round_trip(const LoadOptions& o) {
  net::ByteWriter w;
  write_load_options(w, o);
  net::ByteReader r(w.data());
  const LoadOptions back = read_load_options(r);
  r.finish("load options");
  return back;
}

// Every proper prefix of `bytes` is refused as truncated: a read past the end ("message truncated
// reading X: need N bytes, M left") or a count the bytes cannot hold ("count N needs more than the
// M bytes left"); both name the bytes left. One byte more is refused as trailing.
void expect_exact_length(const Bytes& bytes, const std::function<void(net::ByteReader&)>& read, const char* name) {
  ASSERT_FALSE(bytes.empty());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Bytes cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    net::ByteReader r(cut);
    EXPECT_ERROR(read(r), " left") << name << " truncated to " << n << " of " << bytes.size() << " bytes";
  }
  Bytes longer = bytes;
  longer.push_back(0);
  net::ByteReader r(longer);
  EXPECT_ERROR(read(r), "1 unexpected trailing bytes") << name;
}

// A tiny generated model and its tensor-split plan over two devices.
struct Model {
  Bytes bytes;
  std::unique_ptr<gguf::File> file;
  parallel::Plan plan;
  Model() {
    tools::GenModelOptions o;
    o.type = "q4_0";
    o.seed = 5;
    o.arch = "qwen2";  // q/k/v biases: nodes with a bias slice too
    bytes = tools::generate_model_bytes(o);
    file = gguf::File::parse(bytes.data(), bytes.size(), "tiny.gguf");
    const auto cfg = model::read_config(*file);
    plan = parallel::make_plan(parallel::SplitMode::Tensor, model::build_llama_graph(cfg), model::weight_table(*file),
                               {1, 1});
  }
};
const Model& tiny() {
  static const Model m;
  return m;
}

// ---------------------------------------------------------------- graph

void expect_same_range(const parallel::Range& a, const parallel::Range& b, const std::string& what) {
  EXPECT_EQ(a.begin, b.begin) << what;
  EXPECT_EQ(a.end, b.end) << what;
}

void expect_same_slice(const parallel::WeightSlice& a, const parallel::WeightSlice& b, const std::string& what) {
  EXPECT_EQ(a.tensor, b.tensor) << what;
  EXPECT_EQ(a.kind, b.kind) << what;
  expect_same_range(a.range, b.range, what);
  expect_same_range(a.experts, b.experts, what + " experts");
  EXPECT_EQ(a.stride, b.stride) << what;
  EXPECT_EQ(a.repeats, b.repeats) << what;
}

void expect_same_graph(const parallel::DeviceGraph& a, const parallel::DeviceGraph& b) {
  EXPECT_EQ(a.device, b.device);
  const graph::Dims &x = a.dims, &y = b.dims;
  EXPECT_EQ(x.n_embd, y.n_embd);
  EXPECT_EQ(x.n_head, y.n_head);
  EXPECT_EQ(x.n_head_kv, y.n_head_kv);
  EXPECT_EQ(x.head_dim, y.head_dim);
  EXPECT_EQ(x.n_ff, y.n_ff);
  EXPECT_EQ(x.n_vocab, y.n_vocab);
  EXPECT_EQ(x.n_layer, y.n_layer);
  EXPECT_EQ(x.norm_eps, y.norm_eps);
  EXPECT_EQ(x.rope.n_rot, y.rope.n_rot);
  EXPECT_EQ(x.rope.freq_base, y.rope.freq_base);
  EXPECT_EQ(x.rope.freq_scale, y.rope.freq_scale);
  EXPECT_EQ(x.rope.neox, y.rope.neox);
  EXPECT_EQ(x.rope.llama3_factor, y.rope.llama3_factor);
  EXPECT_EQ(x.rope.llama3_low_freq_factor, y.rope.llama3_low_freq_factor);
  EXPECT_EQ(x.rope.llama3_high_freq_factor, y.rope.llama3_high_freq_factor);
  EXPECT_EQ(x.rope.llama3_original_ctx, y.rope.llama3_original_ctx);
  EXPECT_EQ(x.rope.freq_factors, y.rope.freq_factors);
  EXPECT_EQ(x.rope, y.rope);  // and the rest of it (LongRoPE's attention factor)
  EXPECT_EQ(x.embd_scale, y.embd_scale);
  EXPECT_EQ(x.attn_scale, y.attn_scale);
  EXPECT_EQ(x.logit_softcap, y.logit_softcap);
  EXPECT_EQ(x.n_swa, y.n_swa);
  EXPECT_EQ(x.swa_layers, y.swa_layers);
  EXPECT_EQ(x.rope_swa, y.rope_swa);
  EXPECT_EQ(x.layer_heads, y.layer_heads);
  EXPECT_EQ(x.layer_ff, y.layer_ff);
  EXPECT_EQ(x.kv_source, y.kv_source);
  EXPECT_EQ(x.n_embd_per_layer, y.n_embd_per_layer);
  EXPECT_EQ(x.n_expert, y.n_expert);
  EXPECT_EQ(x.n_expert_used, y.n_expert_used);
  EXPECT_EQ(x.n_ff_exp, y.n_ff_exp);
  EXPECT_EQ(x.n_ff_shexp, y.n_ff_shexp);
  EXPECT_EQ(x.expert_weights_norm, y.expert_weights_norm);
  EXPECT_EQ(x.full_attention_interval, y.full_attention_interval);
  EXPECT_EQ(x.linear_k_heads, y.linear_k_heads);
  EXPECT_EQ(x.linear_v_heads, y.linear_v_heads);
  EXPECT_EQ(x.linear_head_dim, y.linear_head_dim);
  EXPECT_EQ(x.linear_conv_kernel, y.linear_conv_kernel);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const parallel::LocalNode &n = a.nodes[i], &m = b.nodes[i];
    const std::string what = "node " + std::to_string(i) + " (" + n.label + ")";
    EXPECT_EQ(n.op, m.op) << what;
    EXPECT_EQ(n.source, m.source) << what;
    EXPECT_EQ(n.inputs, m.inputs) << what;
    EXPECT_EQ(n.width, m.width) << what;
    expect_same_slice(n.weight, m.weight, what + " weight");
    expect_same_slice(n.bias, m.bias, what + " bias");
    EXPECT_EQ(n.layer, m.layer) << what;
    EXPECT_EQ(n.label, m.label) << what;
    expect_same_range(n.q_heads, m.q_heads, what + " q heads");
    expect_same_range(n.kv_heads, m.kv_heads, what + " kv heads");
    expect_same_range(n.experts, m.experts, what + " experts");
    EXPECT_EQ(n.gather, m.gather) << what;
    EXPECT_EQ(n.granule, m.granule) << what;
    EXPECT_EQ(n.factor, m.factor) << what;
    EXPECT_EQ(n.offset, m.offset) << what;
  }
  EXPECT_EQ(a.output, b.output);
  expect_same_range(a.vocab, b.vocab, "vocab");
  EXPECT_EQ(a.has_logits, b.has_logits);
  EXPECT_EQ(a.passes_residual, b.passes_residual);
  EXPECT_EQ(a.weight_bytes, b.weight_bytes);
  EXPECT_EQ(a.kv_values_per_token, b.kv_values_per_token);
  EXPECT_EQ(a.kv_window_values, b.kv_window_values);
  EXPECT_EQ(a.state_values_per_slot, b.state_values_per_slot);
}

Bytes graph_bytes(const parallel::DeviceGraph& g) {
  net::ByteWriter w;
  write_graph(w, g);
  return std::move(w.data());
}
parallel::DeviceGraph read_whole_graph(net::ByteReader& r) {
  auto g = read_graph(r);
  r.finish("graph");
  return g;
}
parallel::DeviceGraph graph_round_trip(const parallel::DeviceGraph& g) {
  const Bytes b = graph_bytes(g);
  net::ByteReader r(b);
  return read_whole_graph(r);
}

// A planned graph with every optional field set to something other than its default.
parallel::DeviceGraph rich_graph() {
  parallel::DeviceGraph g = tiny().plan.devices[1];
  g.dims.rope.neox = true;
  g.dims.rope.llama3_factor = 8.f;
  g.dims.rope.freq_factors = {1.f, 2.5f, -0.f, 1e-30f};
  g.dims.n_expert = 60;
  g.dims.n_expert_used = 4;
  g.dims.n_ff_exp = 1408;
  g.dims.n_ff_shexp = 5632;
  g.dims.expert_weights_norm = true;
  g.dims.rope.attn_factor = 1.19f;
  g.dims.embd_scale = 33.9f;  // Gemma's
  g.dims.attn_scale = 0.0625f;
  g.dims.logit_softcap = 30.f;
  g.dims.n_swa = 512;
  g.dims.swa_layers.assign(g.dims.n_layer, 1);
  g.dims.swa_layers.back() = 0;
  g.dims.rope_swa = g.dims.rope;
  g.dims.rope_swa.freq_base = 10000.f;
  g.dims.layer_heads.assign(g.dims.n_layer, {g.dims.n_head, g.dims.head_dim / 2});  // Gemma 4's
  g.dims.layer_heads.back() = {g.dims.n_head_kv, g.dims.head_dim};
  g.dims.layer_ff.assign(g.dims.n_layer, g.dims.n_ff);  // Gemma 4 E2B's
  g.dims.layer_ff.back() = 2 * g.dims.n_ff;
  g.dims.kv_source.resize(g.dims.n_layer);
  for (int l = 0; l < g.dims.n_layer; ++l) g.dims.kv_source[l] = l;
  g.dims.kv_source.back() = 0;
  g.dims.n_embd_per_layer = 256;
  g.dims.full_attention_interval = 4;  // Qwen 3.5's
  g.dims.linear_k_heads = 16;
  g.dims.linear_v_heads = 32;
  g.dims.linear_head_dim = 128;
  g.dims.linear_conv_kernel = 4;
  g.state_values_per_slot = 3 * 16 * 128 * 128;
  g.nodes[0].weight.range = {128, 1152};  // value heads in runs
  g.nodes[0].weight.stride = 2048;
  g.nodes[0].weight.repeats = 2;
  g.kv_window_values = 16;
  g.nodes[1].experts = {12, 30};
  g.nodes[1].weight.experts = {12, 30};
  g.nodes[1].granule = 96;
  g.nodes[2].factor = 0.0625f;  // Gemma 4's router input scale
  parallel::LocalNode slice{};
  slice.op = parallel::LocalOp::Slice;
  slice.inputs = {0};
  slice.offset = 16;
  slice.width = g.nodes[0].width - 16;
  g.nodes.push_back(slice);
  parallel::LocalNode gather{};
  gather.op = parallel::LocalOp::AllGather;
  gather.inputs = {static_cast<int>(g.nodes.size()) - 1};
  gather.width = 64;
  gather.layer = 1;
  gather.label = "gathered";
  gather.gather = {{0, 32}, {32, 64}};
  g.nodes.push_back(gather);
  g.passes_residual = true;
  g.weight_bytes = (uint64_t{1} << 40) + 3;
  return g;
}

TEST(RemoteMessages, PlannedGraphsRoundTrip) {
  const auto& plan = tiny().plan;
  ASSERT_EQ(plan.devices.size(), 2u);
  for (const auto& g : plan.devices) {
    ASSERT_FALSE(g.nodes.empty());
    expect_same_graph(graph_round_trip(g), g);
  }
  // The plan exercises what the wire carries: split slices, biases, head ranges, logits.
  bool rows = false, cols = false, bias = false, heads = false;
  for (const auto& n : plan.devices[1].nodes) {
    rows |= n.weight.kind == Kind::Rows;
    cols |= n.weight.kind == Kind::Cols;
    bias |= n.bias.kind != Kind::None;
    heads |= !n.q_heads.empty();
  }
  EXPECT_TRUE(rows && cols && bias && heads);
  EXPECT_TRUE(plan.devices[1].has_logits);
  EXPECT_FALSE(plan.devices[1].vocab.empty());
}

TEST(RemoteMessages, GraphWithEveryFieldSetRoundTrips) {
  const auto g = rich_graph();
  expect_same_graph(graph_round_trip(g), g);
  parallel::DeviceGraph no_nodes;
  no_nodes.dims = g.dims;
  expect_same_graph(graph_round_trip(no_nodes), no_nodes);
}

TEST(RemoteMessages, GraphTruncatedOrExtendedIsRejected) {
  expect_exact_length(
      graph_bytes(rich_graph()), [](net::ByteReader& r) { read_whole_graph(r); }, "graph");
}

TEST(RemoteMessages, GraphWithBadValuesIsRejected) {
  auto g = rich_graph();
  g.nodes[1].inputs = {1};  // itself: not earlier
  EXPECT_ERROR(graph_round_trip(g), "node 1: input 1 is not an earlier node");
  g = rich_graph();
  g.nodes[2].inputs = {-1};
  EXPECT_ERROR(graph_round_trip(g), "node 2: input -1 is not an earlier node");
  g = rich_graph();
  g.output = static_cast<int>(g.nodes.size());
  EXPECT_ERROR(graph_round_trip(g), "graph output");
  g = rich_graph();
  g.output = -2;
  EXPECT_ERROR(graph_round_trip(g), "graph output -2");
  g = rich_graph();
  g.nodes[0].width = -1;
  EXPECT_ERROR(graph_round_trip(g), "node 0: width -1");
  g = rich_graph();
  g.nodes[0].op = parallel::LocalOp::Count;
  EXPECT_ERROR(graph_round_trip(g),
               fmt::format("local op: {} is out of range", static_cast<int>(parallel::LocalOp::Count)));
  g = rich_graph();
  g.nodes[0].weight.kind = static_cast<Kind>(4);
  EXPECT_ERROR(graph_round_trip(g), "slice kind 4 is out of range");
  g = rich_graph();
  g.nodes[0].q_heads = {4, 2};
  EXPECT_ERROR(graph_round_trip(g), "q heads: bad range [4, 2)");
  g = rich_graph();
  g.nodes[1].experts = {30, 12};
  EXPECT_ERROR(graph_round_trip(g), "experts: bad range [30, 12)");
  g = rich_graph();
  g.nodes[1].weight.experts = {-2, 12};
  EXPECT_ERROR(graph_round_trip(g), "slice experts: bad range [-2, 12)");
  g = rich_graph();
  g.nodes[0].weight.repeats = 0;
  EXPECT_ERROR(graph_round_trip(g), "0 runs 2048 apart");
  g = rich_graph();
  g.nodes[0].weight.stride = 1;  // runs overlapping
  EXPECT_ERROR(graph_round_trip(g), "2 runs 1 apart");
  g = rich_graph();
  g.dims.linear_v_heads = 33;
  EXPECT_ERROR(graph_round_trip(g), "linear attention of 33 value heads over 16 key heads");
  g = rich_graph();
  g.dims.n_expert_used = 61;
  EXPECT_ERROR(graph_round_trip(g), "dims: 61 experts used of 60");
  g = rich_graph();
  g.vocab = {-1, 5};
  EXPECT_ERROR(graph_round_trip(g), "vocab range: bad range [-1, 5)");
  g = rich_graph();
  g.dims.n_head_kv = 0;
  EXPECT_ERROR(graph_round_trip(g), "heads over 0 kv heads");
  g = rich_graph();
  g.dims.layer_heads.front().n_head_kv = g.dims.n_head + 1;
  EXPECT_ERROR(graph_round_trip(g), fmt::format("heads over {} kv heads", g.dims.n_head + 1));
  g = rich_graph();
  g.dims.layer_heads.back().head_dim = 0;
  EXPECT_ERROR(graph_round_trip(g), "dims: head size 0 is out of range");
  g = rich_graph();
  g.nodes[2].factor = std::numeric_limits<float>::quiet_NaN();
  EXPECT_ERROR(graph_round_trip(g), "node 2: factor nan");
  g = rich_graph();
  g.dims.layer_ff.pop_back();
  EXPECT_ERROR(graph_round_trip(g), "layer FFN widths for");
  g = rich_graph();
  g.dims.layer_ff.front() = 0;
  EXPECT_ERROR(graph_round_trip(g), "dims: FFN width 0 is out of range");
  g = rich_graph();
  g.dims.kv_source.front() = 1;  // a later layer's cache
  EXPECT_ERROR(graph_round_trip(g), "dims: layer 0 reads the KV cache of layer 1");
  g = rich_graph();
  g.dims.n_embd_per_layer = -1;
  EXPECT_ERROR(graph_round_trip(g), "dims: per-layer input width -1 is out of range");
  g = rich_graph();
  for (auto& n : g.nodes)
    if (n.op == parallel::LocalOp::Slice) n.offset += 1;  // one feature past its input
  EXPECT_ERROR(graph_round_trip(g), "a slice of");
  g = rich_graph();
  for (auto& n : g.nodes)
    if (n.op == parallel::LocalOp::Attention) n.inputs.pop_back();
  EXPECT_ERROR(graph_round_trip(g), "attention over 2 inputs");
  g = rich_graph();
  g.dims.head_dim = -4;
  EXPECT_ERROR(graph_round_trip(g), "dims: -4 is out of range");
  g = rich_graph();
  g.dims.layer_heads.push_back({1, 8});
  EXPECT_ERROR(graph_round_trip(g), "layer head shapes for");
  g = rich_graph();
  g.dims.n_embd = -8;
  EXPECT_ERROR(graph_round_trip(g), "dims: -8 is out of range");
  g = rich_graph();
  g.dims.embd_scale = -1.f;
  EXPECT_ERROR(graph_round_trip(g), "dims: scale -1 is out of range");
  g = rich_graph();
  g.dims.n_swa = -5;
  EXPECT_ERROR(graph_round_trip(g), "dims: sliding window -5 is out of range");
  g = rich_graph();
  g.kv_window_values = g.kv_values_per_token + 1;
  EXPECT_ERROR(graph_round_trip(g), "kv window values of");
  g = rich_graph();
  g.nodes.back().gather.assign(parallel::kMaxDevices + 1, {0, 1});
  EXPECT_ERROR(graph_round_trip(g), "gather count: count 17 exceeds the limit 16");
  // A bool that is neither 0 nor 1: has_logits, before passes_residual and four u64s.
  Bytes b = graph_bytes(rich_graph());
  b[b.size() - 34] = 2;
  net::ByteReader r(b);
  EXPECT_ERROR(read_whole_graph(r), "has logits: 2 is not a boolean");
}

// ---------------------------------------------------------------- load options

TEST(RemoteMessages, LoadOptionsRoundTripWithCacheTypes) {
  for (DType k : {DType::F16, DType::F32})
    for (DType v : {DType::F16, DType::F32}) {
      const LoadOptions back = round_trip({1024, 3, 64, k, v});
      EXPECT_EQ(back.n_ctx, 1024);
      EXPECT_EQ(back.n_seq, 3);
      EXPECT_EQ(back.max_tokens, 64);
      EXPECT_EQ(back.k_type, k);
      EXPECT_EQ(back.v_type, v);
    }
}

TEST(RemoteMessages, LoadOptionsRejectOtherCacheTypesAndBadSizes) {
  EXPECT_ERROR(round_trip({1024, 1, 64, DType::Q8_0, DType::F16}), "kv cache type 8 (f32 or f16)");
  EXPECT_ERROR(round_trip({1024, 1, 64, DType::F16, static_cast<DType>(999)}), "kv cache type 999 (f32 or f16)");
  EXPECT_ERROR(round_trip({0, 1, 64, DType::F16, DType::F16}), "n_ctx 0 x n_seq 1 / max tokens 64 out of range");
  EXPECT_ERROR(round_trip({1024, 1, 0, DType::F16, DType::F16}), "n_ctx 1024 x n_seq 1 / max tokens 0 out of range");
  EXPECT_ERROR(round_trip({1024, 0, 64, DType::F16, DType::F16}), "n_ctx 1024 x n_seq 0");
  // A KV cache of more than 2^24 positions in all is refused before anything is allocated.
  EXPECT_ERROR(round_trip({1 << 20, 17, 64, DType::F16, DType::F16}), "out of range");
  EXPECT_ERROR(round_trip({1024, 1, 64, DType::F16, DType::F16, false, -1}), "-1 checkpoints outside 0..1024");
  EXPECT_ERROR(round_trip({1024, 1, 64, DType::F16, DType::F16, false, 1025}), "1025 checkpoints outside 0..1024");
  net::ByteWriter w;  // truncated: the cache types are missing
  w.i32(1024);
  w.i32(1);
  w.i32(64);
  net::ByteReader r(w.data());
  EXPECT_ERROR(read_load_options(r), "message truncated reading kv cache type");
}

// ---------------------------------------------------------------- group setup

Bytes group_bytes(const GroupSetup& g) {
  net::ByteWriter w;
  write_group_setup(w, g);
  return std::move(w.data());
}
GroupSetup read_whole_group(net::ByteReader& r) {
  auto g = read_group_setup(r);
  r.finish("group setup");
  return g;
}
GroupSetup group_round_trip(const GroupSetup& g) {
  const Bytes b = group_bytes(g);
  net::ByteReader r(b);
  return read_whole_group(r);
}

TEST(RemoteMessages, GroupSetupRoundTrips) {
  for (auto wire : {parallel::WireType::F32, parallel::WireType::BF16, parallel::WireType::F16}) {
    const GroupSetup g{"10.0.0.1:7070", "weft/3/1/abcd", 2, 3, wire, 12345};
    const GroupSetup back = group_round_trip(g);
    EXPECT_EQ(back.store, g.store);
    EXPECT_EQ(back.prefix, g.prefix);
    EXPECT_EQ(back.rank, 2);
    EXPECT_EQ(back.size, 3);
    EXPECT_EQ(back.wire, wire);
    EXPECT_EQ(back.timeout_ms, 12345);
  }
  expect_exact_length(
      group_bytes({"h:1", "p", 0, 2}), [](net::ByteReader& r) { read_whole_group(r); }, "group setup");
}

TEST(RemoteMessages, GroupSetupWithBadValuesIsRejected) {
  EXPECT_ERROR(group_round_trip({"h:1", "p", 2, 2}), "group setup: rank 2 of 2 is invalid");
  EXPECT_ERROR(group_round_trip({"h:1", "p", -1, 2}), "group setup: rank -1 of 2 is invalid");
  EXPECT_ERROR(group_round_trip({"h:1", "p", 0, 0}), "group setup: rank 0 of 0 is invalid");
  EXPECT_ERROR(group_round_trip({"h:1", "p", 0, parallel::kMaxDevices + 1}), "rank 0 of 17 is invalid");
  EXPECT_ERROR(group_round_trip({"h:1", "p", 0, 2, static_cast<parallel::WireType>(3)}),
               "wire type: 3 is out of range");
  EXPECT_ERROR(group_round_trip({"h:1", "p", 0, 2, parallel::WireType::F32, 0}), "group setup: timeout 0 ms");
  EXPECT_ERROR(group_round_trip({std::string(kMaxNameBytes + 1, 'x'), "p", 0, 2}),
               "store address: count 513 exceeds the limit 512");
}

// ---------------------------------------------------------------- tensor headers

Bytes headers_bytes(const std::vector<TensorHeader>& ts) {
  net::ByteWriter w;
  write_tensor_headers(w, ts);
  return std::move(w.data());
}
std::vector<TensorHeader> read_whole_headers(net::ByteReader& r) {
  auto ts = read_tensor_headers(r);
  r.finish("tensor headers");
  return ts;
}
std::vector<TensorHeader> headers_round_trip(const std::vector<TensorHeader>& ts) {
  const Bytes b = headers_bytes(ts);
  net::ByteReader r(b);
  return read_whole_headers(r);
}
TensorHeader header_round_trip(const TensorHeader& t) {
  net::ByteWriter w;
  write_tensor_header(w, t);
  net::ByteReader r(w.data());
  auto back = read_tensor_header(r);
  r.finish("tensor header");
  return back;
}

void expect_same_headers(const std::vector<TensorHeader>& a, const std::vector<TensorHeader>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].type, b[i].type) << a[i].name;
    EXPECT_EQ(a[i].shape, b[i].shape) << a[i].name;
    EXPECT_EQ(a[i].n_bytes, b[i].n_bytes) << a[i].name;
  }
}

// The slices a worker of the tiny model's second device gets, and their tensor headers.
struct WorkerSlices {
  parallel::DeviceGraph graph = tiny().plan.devices[1];
  std::vector<SliceSpec> specs = plan_slices(graph, *tiny().file);
  std::vector<TensorHeader> headers;
  WorkerSlices() {
    for (const auto& s : specs) headers.push_back(slice_header(s, tiny().file->tensor(s.source)));
  }
};

TEST(RemoteMessages, TensorHeadersRoundTrip) {
  const WorkerSlices w;
  ASSERT_FALSE(w.headers.empty());
  expect_same_headers(headers_round_trip(w.headers), w.headers);
  expect_same_headers(headers_round_trip({}), {});
  const TensorHeader t{"blk.0.attn_q.weight", DType::Q4_K, {256, 3, 2, 1}, 144 * 6};
  expect_same_headers({header_round_trip(t)}, {t});
  expect_exact_length(
      headers_bytes(w.headers), [](net::ByteReader& r) { read_whole_headers(r); }, "tensor headers");
}

TEST(RemoteMessages, TensorHeadersWithBadValuesAreRejected) {
  EXPECT_ERROR(header_round_trip({"t", static_cast<DType>(4), {32}, 18}), "tensor 't': unknown type id 4");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {}, 0}), "tensor 't' has no dimensions");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {1, 1, 1, 1, 1}, 4}), "tensor dims: count 5 exceeds the limit 4");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {4, 0}, 0}), "tensor 't': dim 0");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {-4}, 16}), "tensor 't': dim -4");
  EXPECT_ERROR(header_round_trip({"t", DType::Q8_0, {16}, 17}), "tensor 't': row of 16 is not whole blocks");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {4, 2}, 31}), "tensor 't': 31 bytes do not match its shape");
  EXPECT_ERROR(header_round_trip({"t", DType::F32, {1 << 30, 1 << 30, 1 << 30}, 0}), "tensor 't' is too large");
}

// ---------------------------------------------------------------- model id and slices

Bytes model_id_bytes(const ModelId& m) {
  net::ByteWriter w;
  write_model_id(w, m);
  return std::move(w.data());
}
ModelId read_whole_model_id(net::ByteReader& r) {
  auto m = read_model_id(r);
  r.finish("model id");
  return m;
}
ModelId model_id_round_trip(const ModelId& m) {
  const Bytes b = model_id_bytes(m);
  net::ByteReader r(b);
  return read_whole_model_id(r);
}

constexpr const char* kHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

TEST(RemoteMessages, ModelIdRoundTrips) {
  const ModelId m{123456789012, kHash, "tiny.gguf"};
  const ModelId back = model_id_round_trip(m);
  EXPECT_EQ(back.size, m.size);
  EXPECT_EQ(back.sha256, m.sha256);
  EXPECT_EQ(back.file_name, m.file_name);
  EXPECT_TRUE(back.known());
  const ModelId unknown = model_id_round_trip({42, "", ""});  // parsed from memory: no hash
  EXPECT_EQ(unknown.size, 42u);
  EXPECT_FALSE(unknown.known());
  expect_exact_length(
      model_id_bytes(m), [](net::ByteReader& r) { read_whole_model_id(r); }, "model id");
}

TEST(RemoteMessages, ModelIdWithABadHashIsRejected) {
  std::string upper = kHash;
  upper[10] = 'A';
  EXPECT_ERROR(model_id_round_trip({1, upper, "m"}), "is not a SHA-256 in hex");
  EXPECT_ERROR(model_id_round_trip({1, "abc", "m"}), "model hash 'abc' is not a SHA-256 in hex");
  EXPECT_ERROR(model_id_round_trip({1, std::string(kHash) + "0", "m"}), "model hash: count 65 exceeds the limit 64");
}

Bytes slices_bytes(const std::vector<SliceSpec>& specs) {
  net::ByteWriter w;
  write_slices(w, specs);
  return std::move(w.data());
}
std::vector<SliceSpec> read_whole_slices(net::ByteReader& r) {
  auto s = read_slices(r);
  r.finish("slices");
  return s;
}
std::vector<SliceSpec> slices_round_trip(const std::vector<SliceSpec>& specs) {
  const Bytes b = slices_bytes(specs);
  net::ByteReader r(b);
  return read_whole_slices(r);
}

void expect_same_slices(const std::vector<SliceSpec>& a, const std::vector<SliceSpec>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].source, b[i].source) << a[i].name;
    EXPECT_EQ(a[i].kind, b[i].kind) << a[i].name;
    expect_same_range(a[i].range, b[i].range, a[i].name);
    EXPECT_EQ(a[i].empty, b[i].empty) << a[i].name;
    expect_same_range(a[i].experts, b[i].experts, a[i].name);
  }
}

TEST(RemoteMessages, SlicesRoundTrip) {
  const WorkerSlices w;
  ASSERT_FALSE(w.specs.empty());
  expect_same_slices(slices_round_trip(w.specs), w.specs);
  const std::vector<SliceSpec> hand = {{"s0", "token_embd.weight", Kind::Whole, {}, false},
                                       {"s1", "blk.0.ffn_up.weight", Kind::Rows, {16, 48}, false},
                                       {"s2", "blk.0.ffn_down.weight", Kind::Cols, {32, 64}, true},
                                       {"s3", "blk.0.ffn_up_exps.weight", Kind::Rows, {0, 48}, false, {2, 5}}};
  expect_same_slices(slices_round_trip(hand), hand);
  expect_same_slices(slices_round_trip({}), {});
  expect_exact_length(
      slices_bytes(w.specs), [](net::ByteReader& r) { read_whole_slices(r); }, "slices");
}

TEST(RemoteMessages, SlicesWithBadValuesAreRejected) {
  EXPECT_ERROR(slices_round_trip({{"s0", "t", static_cast<Kind>(4), {}, false}}), "slice s0: kind 4 is out of range");
  EXPECT_ERROR(slices_round_trip({{"s0", "t", Kind::Whole, {}, false, {5, 3}}}),
               "slice s0: experts [5, 3) is not a range");
  Bytes b = slices_bytes({{"s0", "t", Kind::Whole, {}, false}});
  b[b.size() - 33] = 2;  // "empty" is a boolean (the experts' two i64 and the runs' two follow it)
  net::ByteReader r(b);
  EXPECT_ERROR(read_whole_slices(r), "slice empty: 2 is not a boolean");
}

// The Load message as a worker reads it: graph, options, model id and slices, nothing after.
TEST(RemoteMessages, LoadMessageRoundTrips) {
  WorkerSlices ws;
  const LoadOptions lo{4096, 2, 256, DType::F32, DType::F16, false, 6};
  const ModelId id{tiny().bytes.size(), kHash, "tiny.gguf"};
  net::ByteWriter w;
  write_graph(w, ws.graph);
  write_load_options(w, lo);
  write_model_id(w, id);
  write_slices(w, ws.specs);
  auto read_load = [](net::ByteReader& r) {
    read_graph(r);
    read_load_options(r);
    read_model_id(r);
    read_slices(r);
    r.finish("load");
  };
  net::ByteReader r(w.data());
  expect_same_graph(read_graph(r), ws.graph);
  const LoadOptions back = read_load_options(r);
  EXPECT_EQ(back.n_ctx, 4096);
  EXPECT_EQ(back.k_type, DType::F32);
  EXPECT_EQ(back.n_checkpoints, 6);
  EXPECT_EQ(read_model_id(r).size, id.size);
  expect_same_slices(read_slices(r), ws.specs);
  EXPECT_NO_THROW(r.finish("load"));
  expect_exact_length(w.data(), read_load, "load");
}

// ---------------------------------------------------------------- step

Bytes step_bytes(const Step& s) {
  net::ByteWriter w;
  write_step(w, s);
  return std::move(w.data());
}
Step step_round_trip(const Step& s) {
  const Bytes b = step_bytes(s);
  net::ByteReader r(b);
  return read_step(r);  // checks that nothing follows
}

Step rich_step() {
  Step s;
  s.tokens = {1, 5, 9, 3, 0x7fffffff};
  s.input = {0.5f, -1.25f, 3e38f, -0.f};
  StepSeq a;
  a.seq = 3;
  a.pos0 = 77;
  a.n_tokens = 2;
  a.want_candidates = false;
  a.want_logits = true;
  a.sampling = {0.f, 7, 0.5f, 0.125f, 1.1f, 32, 0.75f, -0.5f, 0x0123456789abcdefULL};
  a.recent = {4, 4, 2};
  a.n_logprobs = 7;
  a.score_from = 1;
  a.score_next = {9};
  a.keep_logits = true;
  a.candidate_ids = {9, 3, 0x7fffffff};
  StepSeq b;
  b.seq = 0;
  b.n_tokens = 3;
  s.seqs = {a, b};
  s.state_copies = {{3, 1030}, {1030, 0}};
  return s;
}

// A reread: no tokens, sequences of none.
Step reread_step() {
  Step s;
  s.reread = true;
  s.seqs.resize(2);
  s.seqs[0].seq = 2;
  s.seqs[0].sampling.top_k = 0;
  s.seqs[1].seq = 5;
  s.seqs[1].n_logprobs = 3;
  return s;
}

TEST(RemoteMessages, StepRoundTrips) {
  for (const Step& s : {rich_step(), Step::single({7}, 5), reread_step()}) {
    const Step back = step_round_trip(s);
    EXPECT_EQ(back.reread, s.reread);
    EXPECT_EQ(back.tokens, s.tokens);
    EXPECT_EQ(back.input, s.input);
    ASSERT_EQ(back.seqs.size(), s.seqs.size());
    for (size_t k = 0; k < s.seqs.size(); ++k) {
      const StepSeq &x = s.seqs[k], &y = back.seqs[k];
      EXPECT_EQ(y.seq, x.seq);
      EXPECT_EQ(y.pos0, x.pos0);
      EXPECT_EQ(y.n_tokens, x.n_tokens);
      EXPECT_EQ(y.want_candidates, x.want_candidates);
      EXPECT_EQ(y.want_logits, x.want_logits);
      EXPECT_EQ(y.sampling.temp, x.sampling.temp);
      EXPECT_EQ(y.sampling.top_k, x.sampling.top_k);
      EXPECT_EQ(y.sampling.top_p, x.sampling.top_p);
      EXPECT_EQ(y.sampling.min_p, x.sampling.min_p);
      EXPECT_EQ(y.sampling.repeat_penalty, x.sampling.repeat_penalty);
      EXPECT_EQ(y.sampling.repeat_last_n, x.sampling.repeat_last_n);
      EXPECT_EQ(y.sampling.presence_penalty, x.sampling.presence_penalty);
      EXPECT_EQ(y.sampling.frequency_penalty, x.sampling.frequency_penalty);
      EXPECT_EQ(y.sampling.seed, x.sampling.seed);
      EXPECT_EQ(y.recent, x.recent);
      EXPECT_EQ(y.n_logprobs, x.n_logprobs);
      EXPECT_EQ(y.score_from, x.score_from);
      EXPECT_EQ(y.score_next, x.score_next);
      EXPECT_EQ(y.keep_logits, x.keep_logits);
      EXPECT_EQ(y.candidate_ids, x.candidate_ids);
    }
    ASSERT_EQ(back.state_copies.size(), s.state_copies.size());
    for (size_t k = 0; k < s.state_copies.size(); ++k) {
      EXPECT_EQ(back.state_copies[k].from, s.state_copies[k].from);
      EXPECT_EQ(back.state_copies[k].to, s.state_copies[k].to);
    }
  }
  // read_step checks the end itself: trailing bytes are "step: 1 unexpected trailing bytes".
  expect_exact_length(
      step_bytes(rich_step()), [](net::ByteReader& r) { read_step(r); }, "step");
}

TEST(RemoteMessages, StepWithBadValuesIsRejected) {
  Step s = rich_step();
  s.seqs[0].pos0 = -1;
  EXPECT_ERROR(step_round_trip(s), "step: sequence slot 3 at -1 with 2 tokens");
  s = rich_step();
  s.seqs[1].n_tokens = 4;
  EXPECT_ERROR(step_round_trip(s), "step: sequences hold 6 tokens, the step 5");
  s = rich_step();
  s.seqs[0].score_next = {9, 9};  // rows 1 and 2 of a sequence of 2
  EXPECT_ERROR(step_round_trip(s), "step: scoring rows 1..+2 outside a sequence of 2 tokens");
  s = rich_step();
  s.seqs[0].n_logprobs = model::kMaxTopLogprobs + 1;
  EXPECT_ERROR(step_round_trip(s), "step: 21 top log-probabilities outside -1..20");
  s = rich_step();
  s.seqs[1].n_tokens = 0;  // only a reread's sequences hold no tokens
  s.tokens.resize(3);
  EXPECT_ERROR(step_round_trip(s), "step: sequence slot 0 at 0 with 0 tokens");
  s = reread_step();
  s.tokens = {1};
  EXPECT_ERROR(step_round_trip(s), "step: sequences hold 0 tokens, the step 1");
  Bytes b = step_bytes(rich_step());
  // tokens, input, reread, sequence count, then slot, pos0, n_tokens of the first sequence, then its flags
  const size_t flags = 4 + 4 * rich_step().tokens.size() + 4 + 4 * rich_step().input.size() + 1 + 4 + 12;
  b[flags] = 2;  // want_candidates
  net::ByteReader r(b);
  EXPECT_ERROR(read_step(r), "want candidates: 2 is not a boolean");
  net::ByteWriter w;  // a token count over the limit
  w.u32(static_cast<uint32_t>(kMaxTokens) + 1);
  net::ByteReader r2(w.data());
  EXPECT_ERROR(read_step(r2), "step tokens: count 1048577 exceeds the limit 1048576");
}

// ---------------------------------------------------------------- step result

Bytes step_result_bytes(const StepResult& s, const DeviceStats& st) {
  net::ByteWriter w;
  write_step_result(w, s, st);
  return std::move(w.data());
}

TEST(RemoteMessages, StepResultRoundTripsWithStats) {
  StepResult s;
  s.seqs.resize(2);
  s.seqs[0].candidates.top = {{42, 9.5f}, {7, 3.25f}, {0, -1e30f}};
  s.seqs[1].logits = {1.f, -2.f, 0.5f, 8.f};
  s.seqs[1].scores = {{3.5f, 12.25, -1.f}, {}};  // a target elsewhere: NaN; an empty slice: -inf
  s.seqs[0].logprobs = model::SliceLogprobs{{9.5f, 1.75, 0.f}, {{42, 9.5f}, {3, 9.f}}, {{7, 4.5f}}};
  s.output = {0.25f, 0.125f};
  DeviceStats st;
  for (size_t i = 0; i < st.op_seconds.size(); ++i) st.op_seconds[i] = 0.001 * static_cast<double>(i + 1);
  st.collective_seconds = 1.5;
  st.step_seconds = 2.75;
  st.steps = 1234567890123ULL;
  const Bytes b = step_result_bytes(s, st);
  net::ByteReader r(b);
  DeviceStats back_stats;
  const StepResult back = read_step_result(r, back_stats);
  ASSERT_EQ(back.seqs.size(), 2u);
  ASSERT_EQ(back.seqs[0].candidates.top.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.seqs[0].candidates.top[i].id, s.seqs[0].candidates.top[i].id);
    EXPECT_EQ(back.seqs[0].candidates.top[i].logit, s.seqs[0].candidates.top[i].logit);
  }
  EXPECT_TRUE(back.seqs[0].logits.empty() && back.seqs[1].candidates.top.empty());
  EXPECT_EQ(back.seqs[1].logits, s.seqs[1].logits);
  ASSERT_EQ(back.seqs[1].scores.size(), 2u);
  EXPECT_EQ(back.seqs[1].scores[0].max, 3.5f);
  EXPECT_EQ(back.seqs[1].scores[0].sum_exp, 12.25);
  EXPECT_EQ(back.seqs[1].scores[0].target, -1.f);
  EXPECT_TRUE(std::isinf(back.seqs[1].scores[1].max) && std::isnan(back.seqs[1].scores[1].target));
  ASSERT_TRUE(back.seqs[0].logprobs.has_value());
  EXPECT_FALSE(back.seqs[1].logprobs.has_value());
  const model::SliceLogprobs& lp = *back.seqs[0].logprobs;
  EXPECT_EQ(lp.lse.max, 9.5f);
  EXPECT_EQ(lp.lse.sum_exp, 1.75);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[1].id, 3);
  EXPECT_EQ(lp.top[1].logit, 9.f);
  ASSERT_EQ(lp.raw.size(), 1u);
  EXPECT_EQ(lp.raw[0].id, 7);
  EXPECT_EQ(lp.raw[0].logit, 4.5f);
  EXPECT_EQ(back.output, s.output);
  EXPECT_EQ(back_stats.op_seconds, st.op_seconds);
  EXPECT_EQ(back_stats.collective_seconds, st.collective_seconds);
  EXPECT_EQ(back_stats.step_seconds, st.step_seconds);
  EXPECT_EQ(back_stats.steps, st.steps);

  const Bytes empty = step_result_bytes({}, {});
  net::ByteReader re(empty);
  DeviceStats es;
  es.steps = 9;  // overwritten by what arrives
  const StepResult e = read_step_result(re, es);
  EXPECT_TRUE(e.seqs.empty() && e.output.empty());
  EXPECT_EQ(es.steps, 0u);

  expect_exact_length(
      b,
      [](net::ByteReader& rd) {
        DeviceStats x;
        read_step_result(rd, x);
      },
      "step result");
}

TEST(RemoteMessages, StepResultWithMoreTopLogprobsThanAskableIsRejected) {
  StepResult s;
  s.seqs.resize(1);
  s.seqs[0].logprobs.emplace().top.assign(model::kMaxTopLogprobs + 1, {1, 0.f});
  const Bytes b = step_result_bytes(s, {});
  net::ByteReader r(b);
  DeviceStats st;
  EXPECT_ERROR(read_step_result(r, st), "top log-probabilities: count 21 exceeds the limit 20");
}

TEST(RemoteMessages, StepResultWithOtherOpStatsIsRejected) {
  Bytes b = step_result_bytes({}, {});
  // No sequences and no output: 2 u32 counts, then the op stats count.
  const uint32_t n_ops = static_cast<uint32_t>(DeviceStats{}.op_seconds.size());
  uint32_t fewer = n_ops - 1;
  std::memcpy(&b[8], &fewer, 4);  // little-endian like the wire (x86)
  net::ByteReader r(b);
  DeviceStats st;
  EXPECT_ERROR(read_step_result(r, st), fmt::format("step result: {} op stats, expected {}", fewer, n_ops));
  uint32_t more = n_ops + 1;
  std::memcpy(&b[8], &more, 4);
  net::ByteReader r2(b);
  EXPECT_ERROR(read_step_result(r2, st), fmt::format("op stats: count {} exceeds the limit {}", more, n_ops));
}

// ---------------------------------------------------------------- device info

// A GPU-like device: f32/f16/q8_0 matmuls only, 1 GiB of which 768 MiB free, a hard limit.
ServedDevice gpu_like() {
  ServedDevice d;
  d.name = "vk:0";
  d.threads = 1;
  d.memory = {1u << 30, 768u << 20, true};
  for (size_t op = 0; op < d.weight_types.size(); ++op)
    for (DType t : {DType::F32, DType::F16, DType::Q8_0}) d.weight_types[op].set(static_cast<uint32_t>(t));
  return d;
}

Bytes served_bytes(const ServedDevice& d) {
  net::ByteWriter w;
  write_served_device(w, d);
  return std::move(w.data());
}
ServedDevice served_round_trip(const Bytes& b) {
  net::ByteReader r(b);
  return read_served_device(r);
}

// The fields after the name, as write_served_device lays them out, with any counts and ids.
Bytes served_raw(std::string_view name, int32_t threads, uint64_t total, uint64_t free, uint8_t hard,
                 const std::vector<std::vector<uint32_t>>& ops) {
  net::ByteWriter w;
  w.str(name);
  w.i32(threads);
  w.u64(total);
  w.u64(free);
  w.u8(hard);
  w.u32(static_cast<uint32_t>(ops.size()));
  for (const auto& types : ops) {
    w.u32(static_cast<uint32_t>(types.size()));
    for (uint32_t t : types) w.u32(t);
  }
  return std::move(w.data());
}

TEST(RemoteMessages, DeviceInfoRoundTripsAndSaysWhatTheDeviceRuns) {
  const ServedDevice d = gpu_like();
  const ServedDevice back = served_round_trip(served_bytes(d));
  EXPECT_EQ(back.name, "vk:0");
  EXPECT_EQ(back.kind(), "vk");
  EXPECT_EQ(back.threads, 1);
  EXPECT_EQ(back.memory.total_bytes, 1u << 30);
  EXPECT_EQ(back.memory.free_bytes, 768u << 20);
  EXPECT_TRUE(back.memory.hard_limit);
  EXPECT_EQ(back.weight_types, d.weight_types);
  EXPECT_TRUE(back.supports(parallel::LocalOp::MatMul, DType::Q8_0));
  EXPECT_FALSE(back.supports(parallel::LocalOp::MatMul, DType::Q4_K));
  EXPECT_FALSE(back.supports(parallel::LocalOp::Count, DType::F32));
  expect_exact_length(
      served_bytes(d), [](net::ByteReader& r) { read_served_device(r); }, "device info");
}

// ServedDevice::of asks the device: a CPU device's answers are the CPU kernels', op by op and type by type.
TEST(RemoteMessages, DeviceInfoOfACpuDeviceIsWhatItSupports) {
  CpuDevice cpu({});
  const ServedDevice d = served_round_trip(served_bytes(ServedDevice::of(cpu)));
  EXPECT_EQ(d.name, cpu.name());
  EXPECT_EQ(d.memory.total_bytes, cpu.memory().total_bytes);
  EXPECT_FALSE(d.memory.hard_limit);
  int supported = 0;
  for (int op = 0; op < static_cast<int>(parallel::LocalOp::Count); ++op)
    for (uint32_t t = 0; t < kMaxTypeIds; ++t) {
      if (!dtype_traits(t)) continue;
      const auto o = static_cast<parallel::LocalOp>(op);
      EXPECT_EQ(d.supports(o, static_cast<DType>(t)), cpu_kernels_support(o, static_cast<DType>(t)))
          << parallel::local_op_name(o) << " " << t;
      supported += d.supports(o, static_cast<DType>(t));
    }
  EXPECT_GT(supported, 0);
}

// A newer worker may know more ops (skipped) or fewer (the rest run nothing).
TEST(RemoteMessages, DeviceInfoWithMoreOrFewerOpsIsRead) {
  std::vector<std::vector<uint32_t>> ops(static_cast<size_t>(parallel::LocalOp::Count) + 3, {0, 1});
  ServedDevice d = served_round_trip(served_raw("cpu:0", 4, 100, 50, 0, ops));
  EXPECT_TRUE(d.supports(parallel::LocalOp::AllGather, DType::F16));
  d = served_round_trip(served_raw("cpu:0", 4, 0, 0, 0, {{0}}));  // memory unknown, one op
  EXPECT_TRUE(d.supports(parallel::LocalOp::Embed, DType::F32));
  EXPECT_FALSE(d.supports(parallel::LocalOp::MatMul, DType::F32));
  EXPECT_FALSE(d.memory.known());
}

// Bytes from the network: counts beyond their limit are refused before anything is allocated,
// and every value that would mislead the planner or a log is an error naming it.
TEST(RemoteMessages, DeviceInfoWithHostileValuesIsRejected) {
  const std::vector<std::vector<uint32_t>> one_op = {{0}};
  auto with_op_count = [](uint32_t n) {
    Bytes b = served_raw("vk:0", 1, 100, 50, 1, {});
    std::memcpy(&b[b.size() - 4], &n, 4);  // the op count is the last field written
    return b;
  };
  EXPECT_ERROR(served_round_trip(with_op_count(1u << 30)), "device ops: count 1073741824 exceeds the limit 256");
  EXPECT_ERROR(served_round_trip(with_op_count(200)), "device ops: count 200 needs more than the 0 bytes left");
  Bytes b = served_raw("vk:0", 1, 100, 50, 1, one_op);
  const uint32_t huge = 0xffffffff;
  std::memcpy(&b[b.size() - 8], &huge, 4);  // the one op's type count
  EXPECT_ERROR(served_round_trip(b), "weight types: count 4294967295 exceeds the limit 256");
  EXPECT_ERROR(served_round_trip(served_raw("vk:0", 1, 100, 50, 1, {{300}})), "weight type id 300 (at most 255)");
  EXPECT_ERROR(served_round_trip(served_raw("vk:0", 1, 100, 200, 1, one_op)), "device info: 200 bytes free of 100");
  EXPECT_ERROR(served_round_trip(served_raw("vk:0", 1, 100, 50, 2, one_op)), "device memory limit");
  EXPECT_ERROR(served_round_trip(served_raw("vk:0", 0, 100, 50, 1, one_op)), "device info: 0 threads outside 1..");
  EXPECT_ERROR(served_round_trip(served_raw("vk:0", -5, 100, 50, 1, one_op)), "device info: -5 threads outside 1..");
  EXPECT_ERROR(served_round_trip(served_raw("vk\x1b[2J", 1, 100, 50, 1, one_op)), "not printable ASCII");
  EXPECT_ERROR(served_round_trip(served_raw("", 1, 100, 50, 1, one_op)), "not printable ASCII");
  EXPECT_ERROR(served_round_trip(served_raw(std::string(kMaxNameBytes + 1, 'x'), 1, 100, 50, 1, one_op)),
               "device name: count 513 exceeds the limit 512");
}

}  // namespace
}  // namespace weft::device::remote
