#include "device/remote/remote_messages.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace weft::device::remote {

using net::ByteReader;
using net::ByteWriter;

namespace {

template <typename E>
E read_enum(ByteReader& r, const char* what, E count) {
  const uint8_t v = r.u8(what);
  if (v >= static_cast<uint8_t>(count)) fail("net", "{}: {} is out of range", what, v);
  return static_cast<E>(v);
}

void write_range(ByteWriter& w, const parallel::Range& x) {
  w.i64(x.begin);
  w.i64(x.end);
}
parallel::Range read_range(ByteReader& r, const char* what) {
  parallel::Range x{r.i64(what), r.i64(what)};
  if (x.begin < 0 || x.end < x.begin) fail("net", "{}: bad range [{}, {})", what, x.begin, x.end);
  return x;
}

void write_slice(ByteWriter& w, const parallel::WeightSlice& s) {
  w.str(s.tensor);
  w.u8(static_cast<uint8_t>(s.kind));
  write_range(w, s.range);
  write_range(w, s.experts);
  w.i64(s.stride);
  w.i64(s.repeats);
}
parallel::WeightSlice read_slice(ByteReader& r) {
  parallel::WeightSlice s;
  s.tensor = r.str("weight name", kMaxNameBytes);
  const uint8_t k = r.u8("slice kind");
  if (k > static_cast<uint8_t>(parallel::WeightSlice::Kind::Cols)) fail("net", "slice kind {} is out of range", k);
  s.kind = static_cast<parallel::WeightSlice::Kind>(k);
  s.range = read_range(r, "slice range");
  s.experts = read_range(r, "slice experts");
  s.stride = r.i64("slice stride");
  s.repeats = r.i64("slice repeats");
  // Runs side by side, none overlapping the next (a stride of at least the range).
  if (s.repeats < 1 || s.repeats > (1 << 16) || s.stride < 0 || s.stride > (int64_t{1} << 32) ||
      (s.repeats > 1 && s.stride < s.range.size()))
    fail("net", "slice of '{}': {} runs {} apart of [{}, {})", s.tensor, s.repeats, s.stride, s.range.begin,
         s.range.end);
  return s;
}

void write_rope(ByteWriter& w, const RopeParams& p) {
  w.i64(p.n_rot);
  for (float v :
       {p.freq_base, p.freq_scale, p.llama3_factor, p.llama3_low_freq_factor, p.llama3_high_freq_factor,
        p.llama3_original_ctx, p.attn_factor, p.yarn_ext_factor, p.yarn_beta_fast, p.yarn_beta_slow, p.yarn_orig_ctx})
    w.f32(v);
  w.u8(p.neox);
  w.f32s(p.freq_factors);
}
RopeParams read_rope(ByteReader& r) {
  RopeParams p;
  p.n_rot = r.i64("rope n_rot");
  for (float* v : {&p.freq_base, &p.freq_scale, &p.llama3_factor, &p.llama3_low_freq_factor, &p.llama3_high_freq_factor,
                   &p.llama3_original_ctx, &p.attn_factor, &p.yarn_ext_factor, &p.yarn_beta_fast, &p.yarn_beta_slow,
                   &p.yarn_orig_ctx})
    *v = r.f32("rope");
  p.neox = r.boolean("rope neox");
  p.freq_factors = r.f32s("rope freq factors", 1 << 16);
  return p;
}

void write_dims(ByteWriter& w, const graph::Dims& d) {
  for (int64_t v : {d.n_embd, d.n_head, d.n_head_kv, d.head_dim, d.n_ff, d.n_vocab, d.n_layer}) w.i64(v);
  w.f32(d.norm_eps);
  write_rope(w, d.rope);
  for (int64_t v : {d.n_expert, d.n_expert_used, d.n_ff_exp, d.n_ff_shexp}) w.i64(v);
  w.u8(d.expert_weights_norm);
  for (float v : {d.embd_scale, d.attn_scale, d.logit_softcap}) w.f32(v);
  w.i64(d.n_swa);
  w.u8(!d.swa_layers.empty());  // then n_layer flags
  w.bytes(d.swa_layers);
  write_rope(w, d.rope_swa);
  w.u8(static_cast<uint8_t>(d.expert_gating));
  for (float v : {d.swiglu_alpha, d.swiglu_limit}) w.f32(v);
  w.u32(static_cast<uint32_t>(d.layer_heads.size()));  // 0 or n_layer
  for (const auto& h : d.layer_heads)
    for (int64_t v : {h.n_head_kv, h.head_dim}) w.i64(v);
  w.u32(static_cast<uint32_t>(d.layer_ff.size()));  // 0 or n_layer
  for (int64_t v : d.layer_ff) w.i64(v);
  w.i32s(d.kv_source);  // empty or n_layer
  w.i64(d.n_embd_per_layer);
  for (int64_t v : {d.kv_lora_rank, d.v_head_dim, d.n_layer_dense_lead, d.n_expert_groups, d.n_group_used}) w.i64(v);
  w.f32(d.expert_weights_scale);
  for (int64_t v :
       {d.full_attention_interval, d.linear_k_heads, d.linear_v_heads, d.linear_head_dim, d.linear_conv_kernel})
    w.i64(v);
  w.u8(d.linear_v_grouped ? 1 : 0);
}
graph::Dims read_dims(ByteReader& r) {
  graph::Dims d;
  for (int64_t* v : {&d.n_embd, &d.n_head, &d.n_head_kv, &d.head_dim, &d.n_ff, &d.n_vocab, &d.n_layer}) {
    *v = r.i64("dims");
    if (*v < 0 || *v > (int64_t{1} << 32)) fail("net", "dims: {} is out of range", *v);
  }
  auto check_heads = [&](int64_t n_kv, int64_t head_dim) {
    if (n_kv <= 0 || d.n_head % n_kv) fail("net", "dims: {} heads over {} kv heads", d.n_head, n_kv);
    if (head_dim <= 0 || head_dim > (int64_t{1} << 16)) fail("net", "dims: head size {} is out of range", head_dim);
  };
  check_heads(d.n_head_kv, d.head_dim);
  d.norm_eps = r.f32("norm eps");
  d.rope = read_rope(r);
  for (int64_t* v : {&d.n_expert, &d.n_expert_used, &d.n_ff_exp, &d.n_ff_shexp}) {
    *v = r.i64("expert dims");
    if (*v < 0 || *v > (int64_t{1} << 32)) fail("net", "expert dims: {} is out of range", *v);
  }
  if (d.n_expert_used > d.n_expert || (d.n_expert > 0 && d.n_expert_used == 0))
    fail("net", "dims: {} experts used of {}", d.n_expert_used, d.n_expert);
  d.expert_weights_norm = r.boolean("expert weights norm");
  for (float* v : {&d.embd_scale, &d.attn_scale, &d.logit_softcap}) {
    *v = r.f32("dims scale");
    if (!(*v >= 0 && std::isfinite(*v))) fail("net", "dims: scale {} is out of range", *v);
  }
  d.n_swa = r.i64("sliding window");
  if (d.n_swa < 0 || d.n_swa > (int64_t{1} << 32)) fail("net", "dims: sliding window {} is out of range", d.n_swa);
  if (r.boolean("sliding-window layers")) {
    const auto flags = r.bytes("sliding-window layers", static_cast<size_t>(d.n_layer));
    d.swa_layers.assign(flags.begin(), flags.end());
  }
  d.rope_swa = read_rope(r);
  const uint8_t gating = r.u8("expert gating");
  if (gating > static_cast<uint8_t>(graph::Dims::Gating::Sigmoid))
    fail("net", "dims: expert gating {} is out of range", gating);
  d.expert_gating = static_cast<graph::Dims::Gating>(gating);
  for (float* v : {&d.swiglu_alpha, &d.swiglu_limit}) {
    *v = r.f32("swiglu constants");
    if (!(*v > 0 && std::isfinite(*v))) fail("net", "dims: swiglu constant {} is out of range", *v);
  }
  const uint32_t n_heads = r.u32("layer heads");
  if (n_heads != 0 && n_heads != d.n_layer) fail("net", "dims: {} layer head shapes for {} layers", n_heads, d.n_layer);
  d.layer_heads.resize(n_heads);
  for (auto& h : d.layer_heads) {
    h.n_head_kv = r.i64("layer kv heads");
    h.head_dim = r.i64("layer head size");
    check_heads(h.n_head_kv, h.head_dim);
  }
  const uint32_t n_ff = r.u32("layer FFN widths");
  if (n_ff != 0 && n_ff != d.n_layer) fail("net", "dims: {} layer FFN widths for {} layers", n_ff, d.n_layer);
  d.layer_ff.resize(n_ff);
  for (int64_t& v : d.layer_ff) {
    v = r.i64("layer FFN width");
    if (v <= 0 || v > (int64_t{1} << 32)) fail("net", "dims: FFN width {} is out of range", v);
  }
  d.kv_source = r.i32s("KV source layers", 1 << 16);
  if (!d.kv_source.empty() && static_cast<int64_t>(d.kv_source.size()) != d.n_layer)
    fail("net", "dims: {} KV source layers for {} layers", d.kv_source.size(), d.n_layer);
  for (int l = 0; l < static_cast<int>(d.kv_source.size()); ++l) {
    const int src = d.kv_source[l];  // itself, or an earlier layer with a cache of its own
    if (src < 0 || src > l || d.kv_source[src] != src)
      fail("net", "dims: layer {} reads the KV cache of layer {}", l, src);
  }
  d.n_embd_per_layer = r.i64("per-layer input width");
  if (d.n_embd_per_layer < 0 || d.n_embd_per_layer > (1 << 16))
    fail("net", "dims: per-layer input width {} is out of range", d.n_embd_per_layer);
  for (int64_t* v : {&d.kv_lora_rank, &d.v_head_dim, &d.n_layer_dense_lead, &d.n_expert_groups, &d.n_group_used}) {
    *v = r.i64("MLA and routing dims");
    if (*v < 0 || *v > (int64_t{1} << 16)) fail("net", "dims: MLA or routing value {} is out of range", *v);
  }
  if (d.n_expert_groups > 64 || d.n_group_used > d.n_expert_groups)
    fail("net", "dims: {} of {} expert groups", d.n_group_used, d.n_expert_groups);
  d.expert_weights_scale = r.f32("expert weights scale");
  if (!(d.expert_weights_scale >= 0 && std::isfinite(d.expert_weights_scale)))
    fail("net", "dims: expert weights scale {} is out of range", d.expert_weights_scale);
  for (int64_t* v :
       {&d.full_attention_interval, &d.linear_k_heads, &d.linear_v_heads, &d.linear_head_dim, &d.linear_conv_kernel}) {
    *v = r.i64("linear attention dims");
    if (*v < 0 || *v > (int64_t{1} << 16)) fail("net", "dims: linear attention value {} is out of range", *v);
  }
  if (d.linear_conv_kernel > 16 || d.linear_head_dim > 1024 ||
      (d.linear_k_heads > 0 && d.linear_v_heads % d.linear_k_heads != 0))
    fail("net", "dims: linear attention of {} value heads over {} key heads of {}, convolution {}", d.linear_v_heads,
         d.linear_k_heads, d.linear_head_dim, d.linear_conv_kernel);
  const uint8_t grouped = r.u8("linear value heads' order");
  if (grouped > 1) fail("net", "dims: linear value heads' order {} is neither tiled (0) nor grouped (1)", grouped);
  d.linear_v_grouped = grouped == 1;
  return d;
}

}  // namespace

std::string_view load_source_name(LoadSource s) {
  switch (s) {
    case LoadSource::Stream: return "streamed";
    case LoadSource::ModelDir: return "model dir";
    case LoadSource::Cache: return "cache";
    case LoadSource::Count: break;
  }
  return "?";
}

void write_group_setup(ByteWriter& w, const GroupSetup& g) {
  w.str(g.store);
  w.str(g.prefix);
  w.i32(g.rank);
  w.i32(g.size);
  w.u8(static_cast<uint8_t>(g.wire));
  w.i32(g.timeout_ms);
  w.u8(g.host_shm ? 1 : 0);
}
GroupSetup read_group_setup(ByteReader& r) {
  GroupSetup g;
  g.store = r.str("store address", kMaxNameBytes);
  g.prefix = r.str("group prefix", kMaxNameBytes);
  g.rank = r.i32("rank");
  g.size = r.i32("group size");
  if (g.size < 1 || g.size > parallel::kMaxDevices || g.rank < 0 || g.rank >= g.size)
    fail("net", "group setup: rank {} of {} is invalid", g.rank, g.size);
  g.wire = read_enum(r, "wire type", static_cast<parallel::WireType>(3));
  g.timeout_ms = r.i32("group timeout");
  if (g.timeout_ms <= 0) fail("net", "group setup: timeout {} ms", g.timeout_ms);
  const uint8_t shm = r.u8("host shm");
  if (shm > 1) fail("net", "group setup: host shm flag {}", shm);
  g.host_shm = shm == 1;
  return g;
}

void write_graph(ByteWriter& w, const parallel::DeviceGraph& g) {
  w.i32(g.device);
  write_dims(w, g.dims);
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (const auto& n : g.nodes) {
    w.u8(static_cast<uint8_t>(n.op));
    w.i32(n.source);
    w.i32s(n.inputs);
    w.i64(n.width);
    write_slice(w, n.weight);
    write_slice(w, n.bias);
    w.i32(n.layer);
    w.str(n.label);
    write_range(w, n.q_heads);
    write_range(w, n.kv_heads);
    write_range(w, n.experts);
    w.u32(static_cast<uint32_t>(n.gather.size()));
    for (const auto& x : n.gather) write_range(w, x);
    w.i64(n.granule);
    w.f32(n.factor);
    w.i64(n.offset);
  }
  w.i32(g.output);
  write_range(w, g.vocab);
  w.u8(g.has_logits);
  w.u8(g.passes_residual);
  w.u64(g.weight_bytes);
  w.u64(g.kv_values_per_token);
  w.u64(g.kv_window_values);
  w.u64(g.state_values_per_slot);
}

parallel::DeviceGraph read_graph(ByteReader& r) {
  parallel::DeviceGraph g;
  g.device = r.i32("device index");
  g.dims = read_dims(r);
  const uint32_t n = r.count("node count", kMaxNodes, 8);
  g.nodes.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    auto& x = g.nodes[i];
    x.op = read_enum(r, "local op", parallel::LocalOp::Count);
    x.source = r.i32("node source");
    x.inputs = r.i32s("node inputs", 16);
    for (int in : x.inputs)  // graphs are topological: inputs must come first
      if (in < 0 || static_cast<uint32_t>(in) >= i) fail("net", "node {}: input {} is not an earlier node", i, in);
    x.width = r.i64("node width");
    if (x.width < 0 || x.width > (int64_t{1} << 32)) fail("net", "node {}: width {}", i, x.width);
    x.weight = read_slice(r);
    x.bias = read_slice(r);
    x.layer = r.i32("node layer");
    x.label = r.str("node label", kMaxNameBytes);
    x.q_heads = read_range(r, "q heads");
    x.kv_heads = read_range(r, "kv heads");
    x.experts = read_range(r, "experts");
    const uint32_t ng = r.count("gather count", parallel::kMaxDevices, 16);
    for (uint32_t k = 0; k < ng; ++k) x.gather.push_back(read_range(r, "gather range"));
    x.granule = r.i64("node granule");
    if (x.granule < 0 || x.granule > (int64_t{1} << 32)) fail("net", "node {}: granule {}", i, x.granule);
    x.factor = r.f32("node factor");
    if (!std::isfinite(x.factor)) fail("net", "node {}: factor {}", i, x.factor);
    x.offset = r.i64("slice offset");
    if (x.offset < 0 || x.offset > (int64_t{1} << 32)) fail("net", "node {}: slice offset {}", i, x.offset);
    if (x.op == parallel::LocalOp::Slice && x.width > 0) {  // of each of its heads (one: the whole width)
      const int64_t heads = std::max<int64_t>(1, x.q_heads.size());
      const int64_t in_w = x.inputs.size() == 1 ? g.nodes[x.inputs[0]].width : -1;
      if (in_w < 0 || x.width % heads || in_w % heads || x.offset + x.width / heads > in_w / heads)
        fail("net", "node {}: a slice of {} features from {} past its input", i, x.width, x.offset);
    }
    if (x.op == parallel::LocalOp::DeltaNet && x.inputs.size() != 5)
      fail("net", "node {}: a delta net over {} inputs (q, k, v, beta, alpha)", i, x.inputs.size());
    if (x.op == parallel::LocalOp::CausalConv && x.inputs.size() != 1)
      fail("net", "node {}: a causal conv over {} inputs", i, x.inputs.size());
    if (x.op == parallel::LocalOp::Attention && x.inputs.size() != 1 && x.inputs.size() != 3)
      fail("net", "node {}: attention over {} inputs (q, k and v; or q alone)", i, x.inputs.size());
    if (x.op == parallel::LocalOp::LatentAttention && x.inputs.size() != 4)
      fail("net", "node {}: latent attention over {} inputs (q latent, q, latent, k rope)", i, x.inputs.size());
    if (x.op == parallel::LocalOp::HeadMatMul && x.inputs.size() != 1)
      fail("net", "node {}: a head matmul over {} inputs", i, x.inputs.size());
  }
  g.output = r.i32("graph output");
  if (g.output < -1 || g.output >= static_cast<int>(n)) fail("net", "graph output {} of {} nodes", g.output, n);
  g.vocab = read_range(r, "vocab range");
  g.has_logits = r.boolean("has logits");
  g.passes_residual = r.boolean("passes residual");
  g.weight_bytes = r.u64("weight bytes");
  g.kv_values_per_token = r.u64("kv values");
  g.kv_window_values = r.u64("kv window values");
  if (g.kv_window_values > g.kv_values_per_token)
    fail("net", "{} kv window values of {}", g.kv_window_values, g.kv_values_per_token);
  g.state_values_per_slot = r.u64("state values");
  return g;
}

void write_load_options(ByteWriter& w, const LoadOptions& o) {
  w.i32(o.n_ctx);
  w.i32(o.n_seq);
  w.i32(o.max_tokens);
  w.u32(static_cast<uint32_t>(o.k_type));
  w.u32(static_cast<uint32_t>(o.v_type));
  w.u8(o.exact);
  w.i32(o.n_checkpoints);
}
LoadOptions read_load_options(ByteReader& r) {
  LoadOptions o{r.i32("n_ctx"), r.i32("n_seq"), r.i32("max tokens")};
  if (o.n_ctx <= 0 || o.n_seq <= 0 || o.n_seq > static_cast<int32_t>(kMaxSeqs) ||
      int64_t{o.n_ctx} * o.n_seq > (1 << 24) || o.max_tokens <= 0 || o.max_tokens > static_cast<int32_t>(kMaxTokens))
    fail("net", "load options: n_ctx {} x n_seq {} / max tokens {} out of range", o.n_ctx, o.n_seq, o.max_tokens);
  for (DType* t : {&o.k_type, &o.v_type}) {
    const uint32_t v = r.u32("kv cache type");
    if (v != static_cast<uint32_t>(DType::F32) && v != static_cast<uint32_t>(DType::F16))
      fail("net", "load options: kv cache type {} (f32 or f16)", v);
    *t = static_cast<DType>(v);
  }
  o.exact = r.boolean("exact");
  o.n_checkpoints = r.i32("checkpoints");
  if (o.n_checkpoints < 0 || o.n_checkpoints > static_cast<int32_t>(kMaxCheckpoints))
    fail("net", "load options: {} checkpoints outside 0..{}", o.n_checkpoints, kMaxCheckpoints);
  return o;
}

void write_tensor_header(ByteWriter& w, const TensorHeader& t) {
  w.str(t.name);
  w.u32(static_cast<uint32_t>(t.type));
  w.u32(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) w.i64(d);
  w.u64(t.n_bytes);
}
TensorHeader read_tensor_header(ByteReader& r) {
  TensorHeader t;
  t.name = r.str("tensor name", kMaxNameBytes);
  const uint32_t type = r.u32("tensor type");
  if (!dtype_traits(type)) fail("net", "tensor '{}': unknown type id {}", t.name, type);
  t.type = static_cast<DType>(type);
  const uint32_t nd = r.count("tensor dims", 4, 8);
  if (nd == 0) fail("net", "tensor '{}' has no dimensions", t.name);
  for (uint32_t i = 0; i < nd; ++i) {
    t.shape.push_back(r.i64("tensor dim"));
    if (t.shape.back() <= 0 || t.shape.back() > (int64_t{1} << 32))
      fail("net", "tensor '{}': dim {}", t.name, t.shape.back());
  }
  t.n_bytes = r.u64("tensor bytes");
  if (t.shape[0] % block_size(t.type)) fail("net", "tensor '{}': row of {} is not whole blocks", t.name, t.shape[0]);
  uint64_t rows = 1;
  for (size_t d = 1; d < t.shape.size(); ++d) {
    if (rows > (uint64_t{1} << 40) / static_cast<uint64_t>(t.shape[d])) fail("net", "tensor '{}' is too large", t.name);
    rows *= static_cast<uint64_t>(t.shape[d]);
  }
  const uint64_t row = row_bytes(t.type, t.shape[0]);
  if (rows > (uint64_t{1} << 40) / row || row * rows != t.n_bytes)
    fail("net", "tensor '{}': {} bytes do not match its shape and type {}", t.name, t.n_bytes, dtype_name(t.type));
  return t;
}

void write_tensor_headers(ByteWriter& w, const std::vector<TensorHeader>& ts) {
  w.u32(static_cast<uint32_t>(ts.size()));
  for (const auto& t : ts) write_tensor_header(w, t);
}
std::vector<TensorHeader> read_tensor_headers(ByteReader& r) {
  const uint32_t n = r.count("tensor count", kMaxTensors, 4 + 4 + 4 + 8 + 8);
  std::vector<TensorHeader> ts;
  ts.reserve(n);
  for (uint32_t i = 0; i < n; ++i) ts.push_back(read_tensor_header(r));
  return ts;
}

namespace {
void write_sampling(ByteWriter& w, const model::SamplingParams& p) {
  w.f32(p.temp);
  w.i32(p.top_k);
  w.f32(p.top_p);
  w.f32(p.min_p);
  w.f32(p.repeat_penalty);
  w.i32(p.repeat_last_n);
  w.f32(p.presence_penalty);
  w.f32(p.frequency_penalty);
  w.u64(p.seed);
}
model::SamplingParams read_sampling(ByteReader& r) {
  model::SamplingParams p;
  p.temp = r.f32("temp");
  p.top_k = r.i32("top k");
  p.top_p = r.f32("top p");
  p.min_p = r.f32("min p");
  p.repeat_penalty = r.f32("repeat penalty");
  p.repeat_last_n = r.i32("repeat last n");
  p.presence_penalty = r.f32("presence penalty");
  p.frequency_penalty = r.f32("frequency penalty");
  p.seed = r.u64("seed");
  return p;
}
}  // namespace

ServedDevice ServedDevice::of(const Device& d) {
  ServedDevice s;
  s.name = d.name();
  s.threads = d.threads();
  s.memory = d.memory();
  for (size_t op = 0; op < s.weight_types.size(); ++op)
    for (uint32_t t = 0; t < kMaxTypeIds; ++t)
      if (dtype_traits(t) && d.supports(static_cast<parallel::LocalOp>(op), static_cast<DType>(t)))
        s.weight_types[op].set(t);
  return s;
}

bool ServedDevice::supports(parallel::LocalOp op, DType t) const {
  const auto id = static_cast<uint32_t>(t);
  return op < parallel::LocalOp::Count && id < kMaxTypeIds && weight_types[static_cast<size_t>(op)].test(id);
}

void write_served_device(ByteWriter& w, const ServedDevice& d) {
  w.str(d.name);
  w.i32(d.threads);
  w.u64(d.memory.total_bytes);
  w.u64(d.memory.free_bytes);
  w.u8(d.memory.hard_limit);
  w.u32(static_cast<uint32_t>(d.weight_types.size()));
  for (const auto& types : d.weight_types) {
    w.u32(static_cast<uint32_t>(types.count()));
    for (uint32_t t = 0; t < kMaxTypeIds; ++t)
      if (types.test(t)) w.u32(t);
  }
}

ServedDevice read_served_device(ByteReader& r) {
  ServedDevice d;
  d.name = r.str("device name", kMaxNameBytes);
  // It is printed in reports and logs: no control characters from a peer.
  if (d.name.empty() || !std::all_of(d.name.begin(), d.name.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
    fail("net", "device info: the device name is empty or not printable ASCII");
  d.threads = r.i32("device threads");
  if (d.threads < 1 || d.threads > kMaxServedThreads)
    fail("net", "device info: {} threads outside 1..{}", d.threads, kMaxServedThreads);
  d.memory.total_bytes = r.u64("device memory");
  d.memory.free_bytes = r.u64("device free memory");
  d.memory.hard_limit = r.boolean("device memory limit");
  if (d.memory.free_bytes > d.memory.total_bytes)
    fail("net", "device info: {} bytes free of {}", d.memory.free_bytes, d.memory.total_bytes);
  const uint32_t n_ops = r.count("device ops", kMaxOps, 4);
  for (uint32_t op = 0; op < n_ops; ++op) {
    const uint32_t n_types = r.count("weight types", kMaxTypeIds, 4);
    for (uint32_t k = 0; k < n_types; ++k) {
      const uint32_t t = r.u32("weight type");
      if (t >= kMaxTypeIds) fail("net", "device info: weight type id {} (at most {})", t, kMaxTypeIds - 1);
      if (op < d.weight_types.size()) d.weight_types[op].set(t);
    }
  }
  r.finish("device info");
  return d;
}

void write_step(ByteWriter& w, const Step& s) {
  w.i32s(s.tokens);
  w.f32s(s.input);
  w.u8(s.reread);
  w.u32(static_cast<uint32_t>(s.seqs.size()));
  for (const StepSeq& q : s.seqs) {
    w.i32(q.seq);
    w.i32(q.pos0);
    w.i32(q.n_tokens);
    w.u8(q.want_candidates);
    w.u8(q.want_logits);
    write_sampling(w, q.sampling);
    w.i32s(q.recent);
    w.i32(q.n_logprobs);
    w.i32(q.score_from);
    w.i32s(q.score_next);
    w.u8(q.keep_logits);
    w.i32s(q.candidate_ids);
  }
  w.u32(static_cast<uint32_t>(s.state_copies.size()));
  for (const StateCopy& c : s.state_copies) {
    w.i32(c.from);
    w.i32(c.to);
  }
}
// Checks the shape only; the device checks slots and positions against what it holds.
Step read_step(ByteReader& r) {
  Step s;
  s.tokens = r.i32s("step tokens", kMaxTokens);
  s.input = r.f32s("step input", kMaxFloats);
  s.reread = r.boolean("reread");
  s.seqs.resize(r.count("step sequences", kMaxSeqs, 16));
  int64_t total = 0;
  for (StepSeq& q : s.seqs) {
    q.seq = r.i32("sequence slot");
    q.pos0 = r.i32("sequence pos0");
    q.n_tokens = r.i32("sequence tokens");
    if (q.seq < 0 || q.pos0 < 0 || q.n_tokens < (s.reread ? 0 : 1))
      fail("net", "step: sequence slot {} at {} with {} tokens", q.seq, q.pos0, q.n_tokens);
    total += q.n_tokens;
    q.want_candidates = r.boolean("want candidates");
    q.want_logits = r.boolean("want logits");
    q.sampling = read_sampling(r);
    q.recent = r.i32s("recent tokens", kMaxTokens);
    q.n_logprobs = r.i32("top log-probabilities");
    if (q.n_logprobs < -1 || q.n_logprobs > model::kMaxTopLogprobs)
      fail("net", "step: {} top log-probabilities outside -1..{}", q.n_logprobs, model::kMaxTopLogprobs);
    q.score_from = r.i32("score from");
    q.score_next = r.i32s("scored tokens", kMaxTokens);
    if (q.score_from < 0 || q.score_from + static_cast<int64_t>(q.score_next.size()) > q.n_tokens)
      fail("net", "step: scoring rows {}..+{} outside a sequence of {} tokens", q.score_from, q.score_next.size(),
           q.n_tokens);
    q.keep_logits = r.boolean("keep logits");
    q.candidate_ids = r.i32s("candidate ids", kMaxTokens);
  }
  if (total != static_cast<int64_t>(s.tokens.size()))
    fail("net", "step: sequences hold {} tokens, the step {}", total, s.tokens.size());
  s.state_copies.resize(r.count("state copies", kMaxSeqs + kMaxCheckpoints, 8));
  for (StateCopy& c : s.state_copies) {
    c.from = r.i32("state copied from");
    c.to = r.i32("state copied to");
  }
  r.finish("step");
  return s;
}

namespace {
void write_candidates(ByteWriter& w, const std::vector<model::Candidate>& list) {
  w.u32(static_cast<uint32_t>(list.size()));
  for (const model::Candidate& c : list) {
    w.i32(c.id);
    w.f32(c.logit);
  }
}
std::vector<model::Candidate> read_candidates(ByteReader& r, const char* what, uint32_t max) {
  std::vector<model::Candidate> list(r.count(what, max, 8));
  for (model::Candidate& c : list) {
    c.id = r.i32("candidate id");
    c.logit = r.f32("candidate logit");
  }
  return list;
}
}  // namespace

void write_step_result(ByteWriter& w, const StepResult& s, const DeviceStats& st) {
  w.u32(static_cast<uint32_t>(s.seqs.size()));
  for (const SeqResult& q : s.seqs) {
    write_candidates(w, q.candidates.top);
    w.f32s(q.logits);
    w.u32(static_cast<uint32_t>(q.scores.size()));
    for (const model::SliceScore& c : q.scores) {
      w.f32(c.max);
      w.f64(c.sum_exp);
      w.f32(c.target);
    }
    w.u8(q.logprobs.has_value());
    if (q.logprobs) {
      w.f32(q.logprobs->lse.max);
      w.f64(q.logprobs->lse.sum_exp);
      write_candidates(w, q.logprobs->top);
      write_candidates(w, q.logprobs->raw);
    }
  }
  w.f32s(s.output);
  w.u32(static_cast<uint32_t>(st.op_seconds.size()));
  for (double v : st.op_seconds) w.f64(v);
  w.f64(st.collective_seconds);
  w.f64(st.step_seconds);
  w.u64(st.steps);
  w.f64(st.served_seconds);
}

StepResult read_step_result(ByteReader& r, DeviceStats& st) {
  StepResult s;
  s.seqs.resize(r.count("result sequences", kMaxSeqs, 8));
  for (SeqResult& q : s.seqs) {
    q.candidates.top = read_candidates(r, "candidate count", kMaxFloats);
    q.logits = r.f32s("logits", kMaxFloats);
    q.scores.resize(r.count("scores", kMaxTokens, 16));
    for (model::SliceScore& c : q.scores) {
      c.max = r.f32("score max");
      c.sum_exp = r.f64("score sum");
      c.target = r.f32("score target");
    }
    if (r.boolean("has log-probabilities")) {
      model::SliceLogprobs& l = q.logprobs.emplace();
      l.lse.max = r.f32("log-sum-exp max");
      l.lse.sum_exp = r.f64("log-sum-exp sum");
      l.top = read_candidates(r, "top log-probabilities", model::kMaxTopLogprobs);
      l.raw = read_candidates(r, "penalised raw logits", kMaxTokens);
    }
  }
  s.output = r.f32s("output", kMaxFloats);
  const uint32_t nops = r.count("op stats", st.op_seconds.size(), 8);
  if (nops != st.op_seconds.size()) fail("net", "step result: {} op stats, expected {}", nops, st.op_seconds.size());
  for (double& v : st.op_seconds) v = r.f64("op seconds");
  st.collective_seconds = r.f64("collective seconds");
  st.step_seconds = r.f64("step seconds");
  st.steps = r.u64("steps");
  st.served_seconds = r.f64("served seconds");
  r.finish("step result");
  return s;
}

}  // namespace weft::device::remote
