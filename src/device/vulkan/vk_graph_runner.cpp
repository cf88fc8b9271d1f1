#include "device/vulkan/vk_graph_runner.h"

#include "core/error.h"
#include "core/fp16.h"
#include "core/progress.h"
#include "device/buffer_plan.h"
#include "device/cpu/cpu_device.h"
#include "device/group_member.h"
#include "device/vulkan/vk_weight_rows.h"
#include "kernels/linear_attention.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace weft::device::vk {

using parallel::LocalOp;
using Clock = std::chrono::steady_clock;

namespace {

// Push constants, as the shaders declare them.
struct RmsPush {
  uint32_t n, n_rows;
  float eps;
};
struct RopePush {
  uint32_t n_tokens, n_heads, head_dim, n_rot, neox, offset;
};
struct ElementwisePush {
  uint32_t n, width, op;
  float alpha = 0, limit = 0;  // kSwiGluOai's
};
struct QuantizePush {
  uint32_t n_values, act;
};
struct MatmulPush {
  uint32_t rows, cols, n_tok, mode, n_used, expert_first, n_experts, y_row0, w_row0, y_stride, has_bias, bias_expert0;
};
struct KvStorePush {
  uint32_t n_tokens, n_kv, head_dim, n_ctx, windowed;
};
struct AttentionPush {
  uint32_t n_q, n_kv, head_dim, n_ctx, q_head_begin, kv_begin, group;
  float scale;
  uint32_t window, windowed, has_sinks;
};
// attention.comp's MAX_HD: AttentionPush's widest head_dim (DeepSeek's latent rows: 512 + 64)
constexpr int64_t kMaxHeadDim = 576;
struct GegluPush {
  uint32_t n;
};
struct RoutePush {
  uint32_t n_tokens, n_expert, k, norm, selected, sigmoid, has_bias, n_groups, n_groups_used;
  float weights_scale;
};

struct ConvPush {
  uint32_t width, kernel, n_seqs;
};
struct DeltaPush {
  uint32_t n, k_heads, v_heads, grouped, n_seqs;
  float eps;
};

enum ElementwiseOp : uint32_t {
  kAdd = 0,
  kSwiGlu = 1,
  kSigmoidScale = 2,
  kBias = 3,
  kSwiGluOai = 4,
  kScale = 5,
  kSigmoidGate = 6
};

// The activation format of a weight type's shader (quantize.comp's ACT), or -1 for f32 activations.
int act_format(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4: return 0;
    case DType::Q4_1:
    case DType::Q5_1: return 1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return 2;
    default: return -1;
  }
}

std::string matmul_shader(DType t) { return "matmul_" + std::string(dtype_name(t)); }

bool has_matmul(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4: return true;
    default: return false;
  }
}

// Types whose blocks.glsl splits a block into parts (BLOCK_PARTS) for decode.
bool splits_blocks(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }

constexpr uint32_t kTile = 4;  // matmul.comp's TILE

// A tuning knob's value from the environment, in [lo, hi]; nullopt where unset or out of range.
std::optional<int> env_knob(const char* name, int lo, int hi) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < lo || v > hi) return std::nullopt;
  return static_cast<int>(v);
}

// Decode's workgroups: subgroups each, and rows each subgroup computes. A software device (a
// subgroup is one SIMD batch of a CPU core, and each workgroup costs) takes one subgroup over many
// rows; a GPU several subgroups over a row each, for as many loads in flight as it can hold.
// WEFT_VK_MATVEC=S,R sets them (to measure other shapes on a GPU).
struct MatvecShape {
  uint32_t subgroups, rows;
};
MatvecShape matvec_shape(const PhysicalInfo& info) {
  static const std::optional<MatvecShape> forced = []() -> std::optional<MatvecShape> {
    const char* env = std::getenv("WEFT_VK_MATVEC");
    unsigned s = 0, r = 0;
    if (env == nullptr || std::sscanf(env, "%u,%u", &s, &r) != 2 || s < 1 || s > 16 || r < 1 || r > 64)
      return std::nullopt;
    return MatvecShape{s, r};
  }();
  if (forced) return *forced;
  return info.type == VK_PHYSICAL_DEVICE_TYPE_CPU ? MatvecShape{1, 16} : MatvecShape{4, 1};
}

// Whether the legacy types' matmuls take the integer dot product instruction (matmul_*_dot): where
// the device runs it in hardware; WEFT_VK_INT_DOT=0 or 1 decides where the device has it at all.
bool int_dot(const PhysicalInfo& info) {
  static const std::optional<int> forced = env_knob("WEFT_VK_INT_DOT", 0, 1);
  return info.integer_dot && (forced ? *forced == 1 : info.integer_dot_fast);
}

// Whether prompts' and batches' dense matmuls of the legacy types take the tiled GEMM (gemm.comp,
// the same sums as matmul.comp's thread per input row): on GPUs; WEFT_VK_GEMM=0 or 1 decides.
bool tiled_gemm(const PhysicalInfo& info) {
  static const std::optional<int> forced = env_knob("WEFT_VK_GEMM", 0, 1);
  return forced ? *forced == 1 : info.type != VK_PHYSICAL_DEVICE_TYPE_CPU;
}
constexpr uint32_t kGemmRows = 64, kGemmItems = 64;  // gemm.comp's BM, BN

// Layers a submission holds before the next is recorded (VkGraphRunner::run): on a GPU each goes
// off as soon as it is recorded, so that the GPU is not idle while the host records a step; a
// software device runs on the cores that record, and takes the step whole (0).
// WEFT_VK_SUBMIT_LAYERS=N sets it.
int submit_layers(const PhysicalInfo& info) {
  static const std::optional<int> forced = env_knob("WEFT_VK_SUBMIT_LAYERS", 0, 1 << 20);
  return forced ? *forced : info.type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : 1;
}

uint32_t u32(int64_t v) {
  WEFT_ASSERT(v >= 0 && v <= int64_t{UINT32_MAX});
  return static_cast<uint32_t>(v);
}

}  // namespace

bool vk_supports(LocalOp op, DType t) {
  const bool reads_matrix = op == LocalOp::MatMul || op == LocalOp::ExpertMatMul || op == LocalOp::ExpertMatMulSum;
  if (op == LocalOp::Embed) return cpu_kernels_support(op, t);  // rows looked up on the host, by the CPU kernels
  return reads_matrix ? has_matmul(t) : op < LocalOp::Count;
}

VkGraphRunner::VkGraphRunner(Gpu& gpu, parallel::Group* group) : gpu_(gpu), group_(group) {}

VkGraphRunner::~VkGraphRunner() {
  try {
    gpu_.drop_recording();
  } catch (const std::exception&) {  // a hung device: its buffers go with it
  }
  for (auto& n : nodes_)
    for (Buffer* b : {&n.vec, &n.bias, &n.k_cache, &n.v_cache, &n.state}) gpu_.destroy(*b);
  for (auto& n : nodes_)
    for (auto& p : n.w.parts) gpu_.destroy(p.buf);
  for (auto& b : buffers_) gpu_.destroy(b);
  for (Buffer* b : {&upload_, &tok_, &rope_, &rope_swa_, &gelu_table_, &kv_base_, &seqs_, &mla_rows_, &mla_out_,
                    &input_, &act_q_, &act_d_, &act_s_, &staging_, &logits_in_, &logits_, &readback_, &dummy_})
    gpu_.destroy(*b);
}

std::pair<uint32_t, uint32_t> VkGraphRunner::grid(uint64_t groups) const {
  const uint64_t x = std::min<uint64_t>(std::max<uint64_t>(groups, 1), gpu_.max_group_count());
  return {static_cast<uint32_t>(x), static_cast<uint32_t>((groups + x - 1) / x)};
}

void VkGraphRunner::upload(Buffer& dst, uint64_t offset, const uint8_t* src, uint64_t n) {
  while (n > 0) {
    const uint64_t k = std::min(n, upload_.size);
    std::memcpy(upload_.mapped, src, k);
    gpu_.begin();
    gpu_.copy(upload_.buffer, 0, dst.buffer, offset, k);
    gpu_.submit();
    src += k, offset += k, n -= k;
  }
}

Buffer VkGraphRunner::upload_floats(const std::vector<float>& v, const char* what) {
  Buffer b = gpu_.create_buffer(v.size() * sizeof(float), Memory::Device, what);
  upload(b, 0, reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
  return b;
}

// Rows packed in the shaders' layout (device_row_bytes apart, whatever m.row_stride), in parts of
// whole rows or whole experts.
VkGraphRunner::Matrix VkGraphRunner::upload_matrix(const kernels::WeightMatrix& m, int64_t n_experts,
                                                   int64_t expert_first, const std::string& what) {
  if (!has_matmul(m.type))
    fail("vulkan",
         "{}: weight type {} has no Vulkan kernel yet (supported: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k "
         "q5_k q6_k iq4_nl iq4_xs mxfp4)",
         what, dtype_name(m.type));
  WEFT_ASSERT(m.layout == kernels::WeightLayout::Rows);
  Matrix out;
  out.type = m.type;
  out.cols = m.cols;
  out.rows = n_experts > 0 ? m.rows / n_experts : m.rows;
  out.expert_first = expert_first;
  if (m.rows == 0 || m.cols == 0) return out;  // holds nothing of a split matrix
  const uint64_t row = device_row_bytes(m.type, m.cols);
  const int64_t unit_rows = n_experts > 0 ? out.rows : 1;  // a part holds whole units
  const uint64_t unit = row * unit_rows;
  const uint64_t limit = std::min<uint64_t>(gpu_.info().max_buffer_range, uint64_t{1} << 31);
  if (unit > limit)
    fail("vulkan", "{}: one {} of {:.1f} MiB exceeds the device's largest buffer ({:.1f} MiB)", what,
         n_experts > 0 ? "expert" : "row", unit / 1048576.0, limit / 1048576.0);
  const int64_t units = m.rows / unit_rows, per_part = static_cast<int64_t>(limit / unit);
  std::vector<uint8_t> packed;
  for (int64_t u0 = 0; u0 < units; u0 += per_part) {
    const int64_t nu = std::min(per_part, units - u0);
    WeightPart part;
    part.first = u0;
    part.count = nu;
    part.buf = gpu_.create_buffer(unit * nu, Memory::Device, what.c_str());
    const int64_t r0 = u0 * unit_rows, nr = nu * unit_rows;
    if (m.row_stride == row && !split_rows(m.type)) {
      upload(part.buf, 0, m.data + r0 * row, row * nr);
    } else {  // through a bounded host copy
      const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>((uint64_t{64} << 20) / row));
      for (int64_t c0 = 0; c0 < nr; c0 += chunk) {
        const int64_t nc = std::min(chunk, nr - c0);
        packed.resize(row * nc);
        to_device_rows(m.type, m.cols, m.data + (r0 + c0) * m.row_stride, m.row_stride, nc, packed.data());
        upload(part.buf, c0 * row, packed.data(), packed.size());
      }
    }
    out.parts.push_back(std::move(part));
  }
  return out;
}

void VkGraphRunner::load(const parallel::DeviceGraph& graph, const gguf::File& f, const LoadOptions& opt) {
  graph_ = graph;
  opt_ = opt;
  if (opt.exact) fail("vulkan", "--exact (fixed-point sums) runs on CPU devices only");
  for (DType t : {opt.k_type, opt.v_type})
    if (t != DType::F32 && t != DType::F16) fail("vulkan", "KV cache type {}: f32 or f16", dtype_name(t));
  if (opt.k_type != opt.v_type)
    fail("vulkan", "KV cache types differ ({} and {}): give -ctk and -ctv alike", dtype_name(opt.k_type),
         dtype_name(opt.v_type));
  const auto& d = graph_.dims;
  if (d.n_expert_groups > 64) fail("vulkan", "{} expert groups (moe_route.comp holds 64)", d.n_expert_groups);
  for (int l = -1; l < static_cast<int>(d.layer_heads.size()); ++l)
    if (d.head_dim_of(l) > kMaxHeadDim)
      fail("vulkan", "head_dim {} over the attention kernel's {}", d.head_dim_of(l), kMaxHeadDim);
  // The dot product shaders where the device claims the instruction and takes them: a driver that
  // refuses the pipeline leaves the four-product shaders (same sums), not a failed load.
  int_dot_ = int_dot(gpu_.info());
  if (int_dot_) {
    try {
      gpu_.pipeline("matmul_q8_0_dot", 8, sizeof(MatmulPush), {gpu_.info().lanes()});
    } catch (const Error& e) {
      int_dot_ = false;
      fmt::print(stderr, "vulkan: {}: the integer dot product shaders failed ({}); using the others\n",
                 gpu_.info().name, e.what());
    }
  }
  nodes_ = std::vector<NodeState>(graph_.nodes.size());
  windows_ = KvWindows(d, opt);
  host_weights_ = std::make_unique<WeightStore>(-1, /*map_weights=*/true);
  upload_ = gpu_.create_buffer(uint64_t{16} << 20, Memory::Upload, "staging");
  dummy_ = gpu_.create_buffer(256, Memory::Device, "unused bindings");
  gpu_.untracked(dummy_.buffer);
  const uint64_t limit = gpu_.info().max_buffer_range;
  // Each Embed and Input has rows of its own in the staging buffer: the host fills them as the step
  // is recorded, and the copies out run after every one is filled.
  int64_t act_values = 0, staged_width = 0, collective_width = 0;
  int64_t mla_values = 0;  // the widest of the latent attention's and the head matmuls' scratch rows
  Progress progress("loading weights", graph_.nodes.size(), "nodes");
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    progress.add(1);
    const auto& ln = graph_.nodes[i];
    NodeState& ns = nodes_[i];
    switch (ln.op) {
      case LocalOp::Embed:
        ns.embed = host_weights_->matrix(f, ln.weight, WeightStore::Use::Lookup);
        ns.staged = int64_t{opt.max_tokens} * staged_width;
        staged_width += ln.width;
        break;
      case LocalOp::MatMul: {
        const kernels::WeightMatrix m = host_weights_->matrix(f, ln.weight, WeightStore::Use::Stream);
        ns.w = upload_matrix(m, 0, 0, ln.label);
        if (ln.bias.kind != parallel::WeightSlice::Kind::None)
          ns.bias = upload_floats(host_weights_->vector(f, ln.bias), "a bias");
        act_values = std::max(act_values, int64_t{opt.max_tokens} * m.cols);
        break;
      }
      case LocalOp::RmsNorm:
      case LocalOp::HeadNorm: {  // no weight (Gemma 4's v norm): ones
        const std::vector<float> w = ln.weight.kind == parallel::WeightSlice::Kind::None
                                         ? std::vector<float>(d.head_dim_of(ln.layer), 1.f)
                                         : host_weights_->vector(f, ln.weight);
        // A head norm's heads are its weight's width (Gated DeltaNet's value heads: linear_head_dim).
        ns.head_width = static_cast<int64_t>(w.size());
        if (ln.op == LocalOp::HeadNorm && (w.empty() || ln.width % ns.head_width != 0))
          fail("vulkan", "{}: a head norm of {} values over {} features", ln.label, w.size(), ln.width);
        ns.vec = upload_floats(w, "a norm weight");
        break;
      }
      case LocalOp::CausalConv: {  // a row of features per tap, as the CPU runner holds them
        if (ln.width == 0) break;
        const std::vector<float> taps = host_weights_->vector(f, ln.weight);
        const int64_t kernel = d.linear_conv_kernel;
        if (static_cast<int64_t>(taps.size()) != ln.width * kernel || kernel < 1 || kernel > 16)
          fail("vulkan", "{}: {} taps for {} features of {}", ln.label, taps.size(), ln.width, kernel);
        ns.vec = upload_floats(kernels::conv_taps_by_tap(taps, ln.width, kernel), "conv taps");
        ns.state_bytes = std::max<int64_t>(kernel - 1, 1) * ln.width * sizeof(float);
        ns.state = gpu_.create_buffer(opt.state_slots() * ns.state_bytes, Memory::Device, "the conv state");
        recurrent_ = true;
        break;
      }
      case LocalOp::DeltaNet: {  // ssm_a, then ssm_dt: one value a value head each
        const int64_t hd = d.linear_head_dim, vh = hd > 0 ? ln.width / hd : 0;
        if (vh == 0) break;
        std::vector<float> gate = host_weights_->vector(f, ln.weight);
        const std::vector<float> dt = host_weights_->vector(f, ln.bias);
        if (static_cast<int64_t>(gate.size()) != vh || static_cast<int64_t>(dt.size()) != vh || hd > 1024)
          fail("vulkan", "{}: {} and {} decay values for {} value heads of {}", ln.label, gate.size(), dt.size(), vh,
               hd);
        gate.insert(gate.end(), dt.begin(), dt.end());
        ns.vec = upload_floats(gate, "decay rates");
        ns.state_bytes = vh * hd * hd * static_cast<int64_t>(sizeof(float));
        const uint64_t bytes = uint64_t{static_cast<uint64_t>(opt.state_slots())} * ns.state_bytes;
        if (bytes > limit)
          fail("vulkan", "{}: a recurrent state of {:.1f} MiB exceeds the device's largest buffer ({:.1f} MiB)",
               ln.label, bytes / 1048576.0, limit / 1048576.0);
        ns.state = gpu_.create_buffer(bytes, Memory::Device, "the delta rule's state");
        recurrent_ = true;
        break;
      }
      case LocalOp::Scale:
        ns.vec =
            upload_floats(ln.weight.kind == parallel::WeightSlice::Kind::None ? std::vector<float>{ln.factor}
                                                                              : host_weights_->vector(f, ln.weight),
                          "a scale");
        break;
      case LocalOp::MoeRoute: {  // each expert's output scale (ones where the model has none), its selection bias
        std::vector<float> scale(d.n_expert, 1.f);
        if (ln.weight.kind != parallel::WeightSlice::Kind::None) scale = host_weights_->vector(f, ln.weight);
        if (static_cast<int64_t>(scale.size()) != d.n_expert)
          fail("vulkan", "{}: {} expert scales for {} experts", ln.label, scale.size(), d.n_expert);
        ns.vec = upload_floats(scale, "expert scales");
        if (ln.bias.kind != parallel::WeightSlice::Kind::None) {
          const std::vector<float> bias = host_weights_->vector(f, ln.bias);
          if (static_cast<int64_t>(bias.size()) != d.n_expert)
            fail("vulkan", "{}: {} selection biases for {} experts", ln.label, bias.size(), d.n_expert);
          ns.bias = upload_floats(bias, "the experts' selection bias");
        }
        break;
      }
      case LocalOp::HeadMatMul: {  // a matrix per head held, each head's input read as its own row
        const int64_t n = ln.q_heads.size();
        if (n == 0) break;
        const kernels::WeightMatrix m = host_weights_->matrix(f, ln.weight, WeightStore::Use::Experts);
        const int64_t in_w = graph_.nodes[ln.inputs[0]].width;
        if (m.rows % n || ln.width != m.rows || in_w % n != 0 || m.cols > in_w / n)
          fail("vulkan", "{}: {} rows of {} columns for {} heads of {} inputs", ln.label, m.rows, m.cols, n, in_w);
        ns.w = upload_matrix(m, n, ln.q_heads.begin, ln.label);
        // Each (token, head) row its head's matrix, weight 1 (matmul.comp's mode 2, one term a row).
        std::vector<float> routes(static_cast<size_t>(opt.max_tokens * n * 2));
        for (int64_t r = 0; r < opt.max_tokens * n; ++r) {
          routes[2 * r] = static_cast<float>(ln.q_heads.begin + r % n);
          routes[2 * r + 1] = 1.f;
        }
        ns.vec = upload_floats(routes, "the heads' routes");
        act_values = std::max(act_values, int64_t{opt.max_tokens} * n * m.cols);
        mla_values = std::max(mla_values, int64_t{opt.max_tokens} * n * m.cols);
        break;
      }
      case LocalOp::LatentAttention: {  // one cache row a token: [latent; k_rope]
        const int64_t row = d.kv_lora_rank + d.rope.n_rot, heads = ln.q_heads.size();
        ns.kv_rows = opt.n_ctx;
        ns.kv_node = static_cast<int>(i);
        const uint64_t bytes = row_bytes(opt.k_type, int64_t{opt.n_seq} * ns.kv_rows * row);
        if (bytes > limit)
          fail("vulkan", "{}: a latent cache of {:.1f} MiB exceeds the device's largest buffer ({:.1f} MiB); lower -c",
               ln.label, bytes / 1048576.0, limit / 1048576.0);
        ns.k_cache = gpu_.create_buffer(bytes, Memory::Device, "the latent cache");
        gpu_.begin();
        gpu_.fill_zero(ns.k_cache.buffer, 0, ns.k_cache.size / 4 * 4);
        gpu_.submit();
        mla_values = std::max(mla_values, int64_t{opt.max_tokens} * std::max<int64_t>(heads, 1) * row);
        break;
      }
      case LocalOp::ExpertMatMul:
      case LocalOp::ExpertMatMulSum: {
        if (ln.weight.kind == parallel::WeightSlice::Kind::None) break;  // holds none of this layer's experts
        const kernels::WeightMatrix m = host_weights_->matrix(f, ln.weight, WeightStore::Use::Experts);
        const int64_t n = ln.experts.size();
        if (n <= 0 || m.rows % n) fail("vulkan", "{}: {} rows for {} experts", ln.label, m.rows, n);
        ns.w = upload_matrix(m, n, ln.experts.begin, ln.label);
        if (ln.bias.kind != parallel::WeightSlice::Kind::None) {  // [n][rows], as the CPU runner reads it
          const std::vector<float> bias = host_weights_->vector(f, ln.bias);
          if (static_cast<int64_t>(bias.size()) != m.rows)
            fail("vulkan", "{}: {} bias values for {} experts of {} rows", ln.label, bias.size(), n, m.rows / n);
          ns.bias = upload_floats(bias, "experts' biases");
        }
        const int64_t x_rows = int64_t{opt.max_tokens} * (ln.op == LocalOp::ExpertMatMulSum ? d.n_expert_used : 1);
        act_values = std::max(act_values, x_rows * m.cols);
        break;
      }
      case LocalOp::Attention: {
        if (ln.weight.kind != parallel::WeightSlice::Kind::None) {
          const std::vector<float> sinks = host_weights_->vector(f, ln.weight);
          if (static_cast<int64_t>(sinks.size()) != ln.q_heads.size())
            fail("vulkan", "{}: {} sinks for {} q heads", ln.label, sinks.size(), ln.q_heads.size());
          ns.vec = upload_floats(sinks, "attention sinks");
        }
        ns.windowed = d.is_swa(ln.layer) && windows_.active();
        ns.kv_rows = ns.windowed ? windows_.rows() : opt.n_ctx;
        ns.kv_node = kv_cache_node(graph_, static_cast<int>(i), "vulkan");
        if (ns.kv_node != static_cast<int>(i)) break;
        const uint64_t bytes =
            row_bytes(opt.k_type, int64_t{opt.n_seq} * ns.kv_rows * ln.kv_heads.size() * d.head_dim_of(ln.layer));
        if (bytes > limit)
          fail("vulkan",
               "{}: a KV cache of {:.1f} MiB exceeds the device's largest buffer ({:.1f} MiB); lower -c or "
               "--parallel",
               ln.label, bytes / 1048576.0, limit / 1048576.0);
        ns.k_cache = gpu_.create_buffer(bytes, Memory::Device, "the K cache");
        ns.v_cache = gpu_.create_buffer(bytes, Memory::Device, "the V cache");
        gpu_.begin();  // positions not yet written are never read, but start from zeros all the same
        gpu_.fill_zero(ns.k_cache.buffer, 0, ns.k_cache.size / 4 * 4);
        gpu_.fill_zero(ns.v_cache.buffer, 0, ns.v_cache.size / 4 * 4);
        gpu_.submit();
        break;
      }
      case LocalOp::AllReduce:
      case LocalOp::AllGather: collective_width = std::max(collective_width, ln.width); break;
      case LocalOp::Input:
        ns.staged = int64_t{opt.max_tokens} * staged_width;
        staged_width += ln.width;
        break;
      default: break;
    }
  }
  // Activations: the kind-neutral plan, less the logits node's buffer (logits are computed in
  // passes of rows into their own, see logits()).
  const BufferPlan plan = plan_buffers(graph_, opt.max_tokens);
  const bool logits_node = graph_.has_logits && graph_.output >= 0;
  if (logits_node && graph_.nodes[graph_.output].op != LocalOp::MatMul)
    fail("vulkan", "the logits node is {}, expected a matmul", parallel::local_op_name(graph_.nodes[graph_.output].op));
  std::vector<int> users(plan.buffer_floats.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) users[plan.node_buffer[i]]++;
  for (size_t b = 0; b < plan.buffer_floats.size(); ++b) {
    const bool only_logits = logits_node && plan.node_buffer[graph_.output] == static_cast<int>(b) && users[b] == 1;
    const uint64_t bytes = plan.buffer_floats[b] * sizeof(float);
    if (!only_logits && bytes > limit)
      fail("vulkan", "activations of {:.1f} MiB exceed the device's largest buffer ({:.1f} MiB); lower -b",
           bytes / 1048576.0, limit / 1048576.0);
    buffers_.push_back(only_logits ? Buffer{} : gpu_.create_buffer(bytes, Memory::Device, "activations"));
  }
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].buffer = plan.node_buffer[i];
  if (logits_node) {
    const auto& ln = graph_.nodes[graph_.output];
    const int64_t k = graph_.nodes[ln.inputs[0]].width, nv = std::max<int64_t>(ln.width, 1);
    logits_rows_ = std::clamp<int64_t>(static_cast<int64_t>(limit / (nv * sizeof(float))), 1, opt.max_tokens);
    logits_rows_ = std::min<int64_t>(logits_rows_, static_cast<int64_t>(limit / (std::max<int64_t>(k, 1) * 4)));
    logits_in_ = gpu_.create_buffer(logits_rows_ * k * sizeof(float), Memory::Device, "logits input rows");
    logits_ = gpu_.create_buffer(logits_rows_ * nv * sizeof(float), Memory::Device, "logits");
    act_values = std::max(act_values, logits_rows_ * k);
  }
  const int64_t out_width = graph_.output >= 0 ? std::max<int64_t>(graph_.nodes[graph_.output].width, 1) : 1;
  readback_ = gpu_.create_buffer(int64_t{opt.max_tokens} * out_width * sizeof(float), Memory::Readback, "readback");
  act_q_ = gpu_.create_buffer(act_values, Memory::Device, "quantized activations");
  act_d_ = gpu_.create_buffer(act_values / 32 * sizeof(float) + 4, Memory::Device, "activation scales");
  act_s_ = gpu_.create_buffer(act_values / 16 * sizeof(float) + 4, Memory::Device, "activation sums");
  tok_ = gpu_.create_buffer(int64_t{opt.max_tokens} * 2 * sizeof(int32_t), Memory::Upload, "token positions");
  rope_ = gpu_.create_buffer(int64_t{opt.max_tokens} * std::max<int64_t>(d.rope.n_rot, 2) * sizeof(float),
                             Memory::Upload, "rope angles");
  if (d.n_swa > 0)
    rope_swa_ = gpu_.create_buffer(int64_t{opt.max_tokens} * std::max<int64_t>(d.rope_swa.n_rot, 2) * sizeof(float),
                                   Memory::Upload, "sliding-window rope angles");
  if (std::any_of(graph_.nodes.begin(), graph_.nodes.end(), [](const auto& n) { return n.op == LocalOp::GeGlu; })) {
    const uint16_t* half = kernels::gelu_f16_table();
    std::vector<float> table(size_t{1} << 16);
    for (size_t h = 0; h < table.size(); ++h) table[h] = fp16_to_f32(half[h]);
    gelu_table_ = upload_floats(table, "the GELU table");
  }
  input_ = gpu_.create_buffer(int64_t{opt.max_tokens} * std::max<int64_t>(staged_width, 1) * sizeof(float),
                              Memory::Upload, "step input");
  if (collective_width > 0)
    staging_ = gpu_.create_buffer(int64_t{opt.max_tokens} * collective_width * sizeof(float), Memory::Readback,
                                  "collective staging");
  kv_base_ = gpu_.create_buffer(int64_t{opt.n_seq} * sizeof(int32_t), Memory::Upload, "sliding-window bases");
  if (recurrent_)
    seqs_ = gpu_.create_buffer(int64_t{opt.n_seq} * 4 * sizeof(int32_t), Memory::Upload, "step sequences");
  if (mla_values > 0) {
    mla_rows_ = gpu_.create_buffer(mla_values * sizeof(float), Memory::Device, "latent attention rows");
    mla_out_ = gpu_.create_buffer(mla_values * sizeof(float), Memory::Device, "latent attention outputs");
  }
  gpu_.destroy(upload_);  // only loads upload through it
  n_cached_.assign(opt.state_slots(), 0);
  gpu_.reserve_marks(u32(graph_.nodes.size() + 1));  // a mark per node, and the logits'
}

StepResult VkGraphRunner::run(const Step& step) {
  if (step.reread) return kept_.reread(graph_, step, "vulkan");
  const auto t0 = Clock::now();
  check_step(step, opt_, n_cached_, "vulkan");
  move_states(step, opt_, graph_.dims.recurrent(), n_cached_, "vulkan");  // the states themselves: copy_states
  if (recurrent_) check_recurrent_step(step, n_cached_, "vulkan");
  const StepLayout l = layout_step(step, opt_.n_ctx);
  if (recurrent_)
    for (size_t s = 0; s < step.seqs.size(); ++s) {
      const StepSeq& q = step.seqs[s];
      int32_t* row = static_cast<int32_t*>(seqs_.mapped) + 4 * s;
      row[0] = static_cast<int32_t>(l.seq_first[s]);
      row[1] = q.n_tokens;
      row[2] = q.seq;
      row[3] = q.pos0 == 0 ? 1 : 0;  // the sequence starts over: its state from zeros
    }
  next_base_ = windows_.advance(step, "vulkan");
  for (size_t slot = 0; slot < next_base_.size(); ++slot)
    static_cast<int32_t*>(kv_base_.mapped)[slot] = static_cast<int32_t>(next_base_[slot]);
  const Ctx c{step, l, l.n_tokens};
  // Per-step inputs: each token's slot and position, and its rope angles.
  auto* tok = static_cast<int32_t*>(tok_.mapped);
  for (int64_t t = 0; t < l.n_tokens; ++t) {
    tok[2 * t] = static_cast<int32_t>(l.kv_row[t] / opt_.n_ctx);
    tok[2 * t + 1] = l.pos[t];
  }
  for (const auto& [rope, buf] : {std::pair{&graph_.dims.rope, &rope_}, std::pair{&graph_.dims.rope_swa, &rope_swa_}})
    if (rope->n_rot > 0 && buf->mapped)
      for (int64_t t = 0; t < l.n_tokens; ++t)
        kernels::rope_cos_sin(*rope, l.pos[t], static_cast<float*>(buf->mapped) + t * rope->n_rot);
  // Each node's GPU time goes to its op kind (Gpu::mark); a collective's to its op too, its span
  // running through the host's part (combine_pending).
  gpu_.mark(-1);
  gpu_.begin();
  pending_.reset();  // a step abandoned midway leaves one
  quantized_ = {};
  try {
    copy_states(step);
    const int per_submission = submit_layers(gpu_.info());
    int layer = -1, layers = 0;
    for (int i = 0; i < static_cast<int>(graph_.nodes.size()); ++i) {
      if (i == graph_.output && graph_.has_logits) continue;  // see logits()
      const int node_layer = graph_.nodes[i].layer;
      if (node_layer != layer && node_layer >= 0) {
        if (layer >= 0 && per_submission > 0 && ++layers % per_submission == 0) gpu_.flush();
        layer = node_layer;
      }
      gpu_.mark(static_cast<int>(graph_.nodes[i].op));
      exec(i, c);
    }
    if (graph_.output >= 0) gpu_.mark(static_cast<int>(graph_.nodes[graph_.output].op));
    if (graph_.has_logits) {
      logits(c);
    } else if (graph_.passes_residual) {
      gpu_.copy(out(graph_.output), 0, readback_.buffer, 0, l.n_tokens * graph_.dims.n_embd * sizeof(float));
      gpu_.barrier();
    }
    if (pending_) {  // the last collective's stretch goes off before its value is combined
      gpu_.flush();
      combine_pending();
    }
    gpu_.submit();
  } catch (...) {
    if (group_) group_->abort();  // peers must not wait for this device in a collective
    throw;
  }
  gpu_.mark(-1);
  const std::vector<double> gpu_seconds = gpu_.take_seconds();
  for (size_t op = 0; op < gpu_seconds.size() && op < stats_.op_seconds.size(); ++op)
    stats_.op_seconds[op] += gpu_seconds[op];
  for (const StepSeq& q : step.seqs) n_cached_[q.seq] = q.pos0 + q.n_tokens;
  windows_.commit(std::move(next_base_));
  StepResult r = assemble_result(graph_, step, l, static_cast<float*>(readback_.mapped));
  kept_.keep(graph_, step, l, static_cast<float*>(readback_.mapped));
  stats_.step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  stats_.steps++;
  return r;
}

void VkGraphRunner::record_rms(VkBuffer x, VkBuffer w, VkBuffer y, uint32_t n, uint32_t rows, float eps) {
  const Pipeline& p = gpu_.pipeline("rms_norm", 3, sizeof(RmsPush));
  const RmsPush push{n, rows, eps};
  const auto [gx, gy] = grid(rows);
  gpu_.dispatch(p, gpu_.bind(p, {x, w, y}), &push, gx, gy);
}

void VkGraphRunner::record_elementwise(VkBuffer a, VkBuffer b, VkBuffer y, uint32_t n, uint32_t width, uint32_t op) {
  const Pipeline& p = gpu_.pipeline("elementwise", 3, sizeof(ElementwisePush));
  const ElementwisePush push{n, width, op, graph_.dims.swiglu_alpha, graph_.dims.swiglu_limit};
  const auto [gx, gy] = grid((n + 255) / 256);
  gpu_.dispatch(p, gpu_.bind(p, {a, b, y}), &push, gx, gy);
}

void VkGraphRunner::record_matmul(const Matrix& w, VkBuffer x, int64_t x_rows, VkBuffer y, int64_t y_stride,
                                  uint32_t mode, int64_t n_tokens, VkBuffer routes, VkBuffer bias, int64_t terms) {
  const int act = act_format(w.type);
  // A node's output quantized once for every matmul that reads it (q, k and v; gate and up): it
  // stays in act_q_ until a node writes that buffer again (exec) or another input is quantized.
  const Quantized input{x, act, x_rows * w.cols};
  const bool held =
      input == quantized_ && std::ranges::any_of(buffers_, [&](const Buffer& b) { return b.buffer == x; });
  if (act >= 0 && !held) {
    quantized_ = input;
    const Pipeline& q = gpu_.pipeline("quantize", 4, sizeof(QuantizePush));
    const QuantizePush push{u32(x_rows * w.cols), static_cast<uint32_t>(act)};
    const uint64_t blocks = x_rows * w.cols / (act == 2 ? 256 : 32);
    const auto [gx, gy] = grid((blocks + 63) / 64);
    gpu_.dispatch(q, gpu_.bind(q, {x, act_q_.buffer, act_d_.buffer, act_s_.buffer}), &push, gx, gy);
  }
  const PhysicalInfo& info = gpu_.info();
  const uint32_t sg = info.lanes();
  const int64_t n_used = terms > 0 ? terms : graph_.dims.n_expert_used;
  const int64_t items = mode == 1 ? n_tokens * n_used : n_tokens;
  // Prompts and batches: a thread per input row (matmul.comp's BY_ITEM) once they fill a subgroup,
  // a workgroup of one subgroup over 4 rows.
  const bool by_item = items >= sg;
  const MatvecShape shape = matvec_shape(info);
  const uint32_t wg = by_item ? sg : sg * shape.subgroups;
  const uint32_t rows_per_wg = by_item ? 4 : shape.subgroups * shape.rows;
  const bool split = !by_item && splits_blocks(w.type) && info.subgroup_shuffle && info.subgroup_size >= 8;
  const std::string dot = split_rows(w.type) && int_dot_ ? "_dot" : "";
  const bool gemm = by_item && mode == 0 && split_rows(w.type) && tiled_gemm(info);
  const Pipeline& p = gemm ? gpu_.pipeline("gemm_" + std::string(dtype_name(w.type)) + dot, 8, sizeof(MatmulPush))
                           : gpu_.pipeline(matmul_shader(w.type) + dot, 8, sizeof(MatmulPush),
                                           {wg, rows_per_wg, by_item ? 1u : 0u, split ? 1u : 0u});
  // Workgroups over the input rows: the GEMM's tiles, a thread each, or TILE each.
  const uint32_t gy = u32(gemm      ? (items + kGemmItems - 1) / kGemmItems
                          : by_item ? (items + wg - 1) / wg
                                    : (items + kTile - 1) / kTile);
  for (size_t pi = 0; pi < w.parts.size(); ++pi) {
    const WeightPart& part = w.parts[pi];
    const VkDescriptorSet set = gpu_.bind(
        p, {part.buf.buffer, x, act_q_.buffer, act_d_.buffer, act_s_.buffer, y, routes, bias ? bias : dummy_.buffer});
    MatmulPush push{};
    push.rows = u32(w.rows);
    push.cols = u32(w.cols);
    push.n_tok = u32(n_tokens);
    push.mode = mode;
    push.n_used = u32(n_used);
    push.y_stride = u32(y_stride);
    push.has_bias = bias ? 1u : 0u;
    push.bias_expert0 = u32(part.first);
    if (mode == 0) {
      // A dispatch per run of rows the device's workgroup count allows (a vocabulary of 150k rows).
      const int64_t tile_rows = gemm ? kGemmRows : rows_per_wg;
      const int64_t max_rows = int64_t{gpu_.max_group_count()} * tile_rows;
      for (int64_t r0 = 0; r0 < part.count; r0 += max_rows) {
        const int64_t nr = std::min<int64_t>(max_rows, part.count - r0);
        push.rows = u32(nr);
        push.y_row0 = u32(part.first + r0);
        push.w_row0 = u32(r0);
        gpu_.dispatch(p, set, &push, u32((nr + tile_rows - 1) / tile_rows), gy);
      }
    } else {
      push.expert_first = u32(w.expert_first + part.first);
      push.n_experts = u32(part.count);
      gpu_.dispatch(p, set, &push, u32((w.rows + rows_per_wg - 1) / rows_per_wg), gy);  // mode 2: parts add in turn
    }
  }
}

void VkGraphRunner::exec(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const auto& d = graph_.dims;
  NodeState& ns = nodes_[i];
  auto in = [&](int k) { return out(ln.inputs[k]); };
  const int64_t n = c.n_tokens * ln.width;
  const VkBuffer y = out(i);
  if (y == quantized_.x) quantized_ = {};  // what act_q_ holds is about to change
  switch (ln.op) {
    case LocalOp::Input:
      if (static_cast<int64_t>(c.step.input.size()) != n)
        fail("vulkan", "input of {} floats, expected {}", c.step.input.size(), n);
      std::memcpy(static_cast<float*>(input_.mapped) + ns.staged, c.step.input.data(), n * sizeof(float));
      gpu_.copy(input_.buffer, ns.staged * sizeof(float), y, 0, n * sizeof(float));
      break;
    case LocalOp::Embed: {
      const auto& w = ns.embed;
      const auto& k = kernels::kernels_for(w.type);
      auto* dst = static_cast<float*>(input_.mapped) + ns.staged;
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        const auto id = c.step.tokens[t];
        if (id < 0 || id >= w.rows) fail("vulkan", "token id {} outside the vocabulary (0..{})", id, w.rows - 1);
        k.dequantize(w.data + w.row_stride * id, dst + t * ln.width, ln.width);
        if (ln.factor != 1) kernels::scale_row(dst + t * ln.width, ln.factor, ln.width);
      }
      gpu_.copy(input_.buffer, ns.staged * sizeof(float), y, 0, n * sizeof(float));
      break;
    }
    case LocalOp::RmsNorm: record_rms(in(0), ns.vec.buffer, y, u32(ln.width), u32(c.n_tokens), d.norm_eps); break;
    case LocalOp::HeadNorm:
      if (ln.width > 0) record_rms(in(0), ns.vec.buffer, y, u32(ns.head_width), u32(n / ns.head_width), d.norm_eps);
      break;
    case LocalOp::MatMul:
      if (ln.width == 0) break;
      if (ns.w.cols == 0) {  // row-parallel with no input features here: adds zeros
        gpu_.fill_zero(y, 0, n * sizeof(float));
        break;
      }
      record_matmul(ns.w, in(0), c.n_tokens, y, ln.width, 0, c.n_tokens, dummy_.buffer);
      if (ns.bias.buffer) record_elementwise(y, ns.bias.buffer, y, u32(n), u32(ln.width), kBias);
      break;
    case LocalOp::Rope: {
      if (ln.width == 0) break;
      if (in(0) != y) gpu_.copy(in(0), 0, y, 0, n * sizeof(float));
      const Pipeline& p = gpu_.pipeline("rope", 2, sizeof(RopePush));
      const RopeParams& rope = d.rope_of(ln.layer);
      // Its heads (MLA's shared RoPE key: one), each rotated from feature `offset` (MLA's queries: the last n_rot).
      const int64_t heads = std::max<int64_t>(1, ln.q_heads.size()), hd = ln.width / heads;
      const RopePush push{u32(c.n_tokens), u32(heads), u32(hd), u32(rope.n_rot), rope.neox ? 1u : 0u, u32(ln.offset)};
      const auto [gx, gy] = grid((c.n_tokens * heads * (rope.n_rot / 2) + 63) / 64);
      gpu_.dispatch(p, gpu_.bind(p, {y, d.is_swa(ln.layer) ? rope_swa_.buffer : rope_.buffer}), &push, gx, gy);
      break;
    }
    case LocalOp::Attention: record_attention(i, c); break;
    case LocalOp::SwiGlu: record_elementwise(in(0), in(1), y, u32(n), u32(ln.width), kSwiGlu); break;
    case LocalOp::SwiGluOai: record_elementwise(in(0), in(1), y, u32(n), u32(ln.width), kSwiGluOai); break;
    case LocalOp::Add: record_elementwise(in(0), in(1), y, u32(n), u32(ln.width), kAdd); break;
    case LocalOp::SigmoidScale:  // a gate a row (the shared expert's) or a value (Qwen 3.5's attention output)
      record_elementwise(in(0), in(1), y, u32(n), u32(ln.width),
                         graph_.nodes[ln.inputs[1]].width == ln.width ? kSigmoidGate : kSigmoidScale);
      break;
    case LocalOp::Scale: record_elementwise(in(0), ns.vec.buffer, y, u32(n), u32(ln.width), kScale); break;
    case LocalOp::Slice: {  // of each head: a run of features per head and token
      const uint64_t heads = std::max<int64_t>(1, ln.q_heads.size()), in_w = graph_.nodes[ln.inputs[0]].width;
      const uint64_t w = ln.width / heads, in_hw = in_w / heads;
      std::vector<VkBufferCopy> rows;
      for (int64_t t = 0; t < c.n_tokens; ++t)
        for (uint64_t h = 0; h < heads; ++h)
          rows.push_back({(t * in_w + h * in_hw + ln.offset) * sizeof(float), (t * ln.width + h * w) * sizeof(float),
                          w * sizeof(float)});
      if (w > 0) gpu_.copy_regions(in(0), y, rows);
      break;
    }
    case LocalOp::GeGlu: {
      const Pipeline& p = gpu_.pipeline("geglu", 4, sizeof(GegluPush));
      const GegluPush push{u32(n)};
      const auto [gx, gy] = grid((n + 255) / 256);
      gpu_.dispatch(p, gpu_.bind(p, {in(0), in(1), y, gelu_table_.buffer}), &push, gx, gy);
      break;
    }
    case LocalOp::AllReduce:
    case LocalOp::AllGather: collective(i, c); break;
    case LocalOp::MoeRoute: {
      const Pipeline& p = gpu_.pipeline("moe_route", 4, sizeof(RoutePush));
      const RoutePush push{u32(c.n_tokens),
                           u32(d.n_expert),
                           u32(d.n_expert_used),
                           d.expert_weights_norm ? 1u : 0u,
                           d.expert_gating == graph::Dims::Gating::SoftmaxSelected ? 1u : 0u,
                           d.expert_gating == graph::Dims::Gating::Sigmoid ? 1u : 0u,
                           ns.bias.buffer ? 1u : 0u,
                           u32(d.n_expert_groups),
                           u32(d.n_group_used),
                           d.expert_weights_scale};
      gpu_.dispatch(p, gpu_.bind(p, {in(0), y, ns.vec.buffer, ns.bias.buffer ? ns.bias.buffer : dummy_.buffer}), &push,
                    u32((c.n_tokens + 63) / 64));
      break;
    }
    case LocalOp::ExpertMatMul:
    case LocalOp::ExpertMatMulSum: {
      const bool sum = ln.op == LocalOp::ExpertMatMulSum;
      // Slots of experts held elsewhere stay zero (ExpertMatMul's width is its k slots of rows).
      gpu_.fill_zero(y, 0, n * sizeof(float));
      if (ln.width == 0 || ns.w.parts.empty()) break;
      const int64_t x_rows = sum ? c.n_tokens * d.n_expert_used : c.n_tokens;
      record_matmul(ns.w, in(0), x_rows, y, ln.width, sum ? 2 : 1, c.n_tokens, in(1), ns.bias.buffer);
      break;
    }
    case LocalOp::CausalConv:
    case LocalOp::DeltaNet: record_linear_attention(i, c); break;
    case LocalOp::HeadMatMul: record_head_matmul(i, c); break;
    case LocalOp::LatentAttention: record_latent_attention(i, c); break;
    case LocalOp::Count: fail("vulkan", "op {} is not implemented on the Vulkan device", local_op_name(ln.op));
  }
}

void VkGraphRunner::record_linear_attention(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const auto& d = graph_.dims;
  if (ln.width == 0) return;
  const uint32_t n_seqs = u32(c.step.seqs.size());
  auto in = [&](int k) { return out(ln.inputs[k]); };
  if (ln.op == LocalOp::CausalConv) {
    const Pipeline& p = gpu_.pipeline("causal_conv", 5, sizeof(ConvPush));
    const ConvPush push{u32(ln.width), u32(d.linear_conv_kernel), n_seqs};
    gpu_.dispatch(p, gpu_.bind(p, {in(0), ns.vec.buffer, ns.state.buffer, out(i), seqs_.buffer}), &push,
                  u32((ln.width + 63) / 64), n_seqs);
    return;
  }
  const int64_t hd = d.linear_head_dim, kh = graph_.nodes[ln.inputs[0]].width / hd;
  const Pipeline& p = gpu_.pipeline("delta_net", 9, sizeof(DeltaPush));
  const DeltaPush push{u32(hd), u32(kh), u32(ln.width / hd), d.linear_v_grouped ? 1u : 0u, n_seqs, d.norm_eps};
  gpu_.dispatch(p,
                gpu_.bind(p, {in(0), in(1), in(2), in(3), in(4), ns.vec.buffer, ns.state.buffer, out(i), seqs_.buffer}),
                &push, u32(ln.width / hd), n_seqs);
}

// DeepSeek's per-head matrices: each (token, head) input slice gathered as its own row, then
// matmul.comp's expert sum (mode 2) of one term a row, head h's matrix with weight 1.
void VkGraphRunner::record_head_matmul(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const int64_t heads = ln.q_heads.size();
  if (heads == 0 || c.n_tokens == 0) return;
  const int64_t in_w = graph_.nodes[ln.inputs[0]].width, in_head = in_w / heads, cols = ns.w.cols;
  std::vector<VkBufferCopy> rows;
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      rows.push_back(
          {(t * in_w + h * in_head) * sizeof(float), (t * heads + h) * cols * sizeof(float), cols * sizeof(float)});
  gpu_.copy_regions(out(ln.inputs[0]), mla_rows_.buffer, rows);
  gpu_.fill_zero(out(i), 0, c.n_tokens * ln.width * sizeof(float));
  record_matmul(ns.w, mla_rows_.buffer, c.n_tokens * heads, out(i), ns.w.rows, 2, c.n_tokens * heads, ns.vec.buffer,
                VK_NULL_HANDLE, 1);
}

// MLA, absorbed (CpuGraphRunner::latent_attention): each token's [latent; k_rope] row into the
// latent cache, then every head attends over the rows with a query of [q_latent; q_rope] as one
// head of kv_lora_rank + n_rot whose values are the same rows; the first kv_lora_rank features of
// each head's output are its softmax-weighted latents.
void VkGraphRunner::record_latent_attention(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const auto& d = graph_.dims;
  const int64_t heads = ln.q_heads.size(), lat = d.kv_lora_rank, rot = d.rope.n_rot, row = lat + rot;
  const int64_t q_w = graph_.nodes[ln.inputs[1]].width, hd = heads > 0 ? q_w / heads : 0;
  const uint64_t f = sizeof(float);
  std::vector<VkBufferCopy> latents, keys;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    latents.push_back({t * lat * f, t * row * f, lat * f});
    keys.push_back({t * rot * f, (t * row + lat) * f, rot * f});
  }
  // The latents and the RoPE keys into rows of the scratch buffer; kv_store puts them in the cache.
  gpu_.copy_regions(out(ln.inputs[2]), mla_rows_.buffer, latents);
  gpu_.copy_regions(out(ln.inputs[3]), mla_rows_.buffer, keys);
  const char* suffix = opt_.k_type == DType::F16 ? "_f16" : "_f32";
  const Pipeline& store = gpu_.pipeline(std::string("kv_store") + suffix, 4, sizeof(KvStorePush));
  const KvStorePush sp{u32(c.n_tokens), 1u, u32(row), u32(ns.kv_rows), 0u};
  const auto [sx, sy] = grid((c.n_tokens * row + 255) / 256);
  gpu_.dispatch(store, gpu_.bind(store, {mla_rows_.buffer, ns.k_cache.buffer, tok_.buffer, kv_base_.buffer}), &sp, sx,
                sy);
  if (heads == 0) return;
  std::vector<VkBufferCopy> q_lat, q_rope, outs;
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const uint64_t r = (t * heads + h) * row;
      q_lat.push_back({(t * heads + h) * lat * f, r * f, lat * f});
      q_rope.push_back({(t * q_w + h * hd + hd - rot) * f, (r + lat) * f, rot * f});
      outs.push_back({r * f, (t * heads + h) * lat * f, lat * f});
    }
  gpu_.copy_regions(out(ln.inputs[0]), mla_rows_.buffer, q_lat);
  gpu_.copy_regions(out(ln.inputs[1]), mla_rows_.buffer, q_rope);
  const Pipeline& p = gpu_.pipeline(std::string("attention") + suffix, 7, sizeof(AttentionPush));
  const AttentionPush ap{u32(heads), 1u, u32(row), u32(ns.kv_rows), 0u, 0u, u32(heads), d.attention_scale(ln.layer),
                         0u,         0u, 0u};
  gpu_.dispatch(p,
                gpu_.bind(p, {mla_rows_.buffer, ns.k_cache.buffer, ns.k_cache.buffer, tok_.buffer, mla_out_.buffer,
                              kv_base_.buffer, dummy_.buffer}),
                &ap, u32(heads), u32(c.n_tokens));
  gpu_.copy_regions(mla_out_.buffer, out(i), outs);
}

void VkGraphRunner::record_attention(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const NodeState& ns = nodes_[i];
  const auto& d = graph_.dims;
  if (ln.width == 0) return;
  const int64_t n_kv = ln.kv_heads.size(), hd = d.head_dim_of(ln.layer);
  const char* suffix = opt_.k_type == DType::F16 ? "_f16" : "_f32";
  const NodeState& kv = nodes_[ns.kv_node];  // an earlier layer's, which stored this step's rows already
  if (ns.kv_node == i) {
    if (ns.windowed) move_windows(ns, n_kv, hd, c);
    const Pipeline& store = gpu_.pipeline(std::string("kv_store") + suffix, 4, sizeof(KvStorePush));
    const KvStorePush sp{u32(c.n_tokens), u32(n_kv), u32(hd), u32(ns.kv_rows), ns.windowed ? 1u : 0u};
    const auto [gx, gy] = grid((c.n_tokens * n_kv * hd + 255) / 256);
    gpu_.dispatch(store, gpu_.bind(store, {out(ln.inputs[1]), ns.k_cache.buffer, tok_.buffer, kv_base_.buffer}), &sp,
                  gx, gy);
    gpu_.dispatch(store, gpu_.bind(store, {out(ln.inputs[2]), ns.v_cache.buffer, tok_.buffer, kv_base_.buffer}), &sp,
                  gx, gy);
  }
  const Pipeline& p = gpu_.pipeline(std::string("attention") + suffix, 7, sizeof(AttentionPush));
  const AttentionPush ap{u32(ln.q_heads.size()),
                         u32(n_kv),
                         u32(hd),
                         u32(ns.kv_rows),
                         u32(ln.q_heads.begin),
                         u32(ln.kv_heads.begin),
                         u32(d.group_of(ln.layer)),
                         d.attention_scale(ln.layer),
                         d.is_swa(ln.layer) ? u32(d.n_swa) : 0u,
                         ns.windowed ? 1u : 0u,
                         ns.vec.buffer ? 1u : 0u};
  const VkBuffer sinks = ns.vec.buffer ? ns.vec.buffer : dummy_.buffer;
  gpu_.dispatch(p,
                gpu_.bind(p, {out(ln.inputs[0]), kv.k_cache.buffer, kv.v_cache.buffer, tok_.buffer, out(i),
                              kv_base_.buffer, sinks}),
                &ap, u32(ln.q_heads.size()), u32(c.n_tokens));
}

// A sliding-window cache whose slot this step moves on: the keys its sequence still needs go to
// the front of each kv head's rows (never overlapping, graph/kv_window.h), before kv_store writes.
void VkGraphRunner::move_windows(const NodeState& ns, int64_t n_kv, int64_t hd, const Ctx& c) {
  const std::vector<KvWindows::Move> moves = windows_.moves(c.step, next_base_);
  for (const KvWindows::Move& m : moves)
    for (auto [cache, type] : {std::pair{&ns.k_cache, opt_.k_type}, std::pair{&ns.v_cache, opt_.v_type}}) {
      const uint64_t row = row_bytes(type, hd);
      std::vector<VkBufferCopy> regions;
      for (int64_t h = 0; h < n_kv; ++h) {
        const uint64_t head = static_cast<uint64_t>((m.seq * n_kv + h) * ns.kv_rows) * row;
        regions.push_back({head + static_cast<uint64_t>(m.src_row) * row, head, static_cast<uint64_t>(m.n_rows) * row});
      }
      gpu_.copy_regions(cache->buffer, cache->buffer, regions);
    }
}

// Step::state_copies, in order, each complete before what follows reads or writes a state.
void VkGraphRunner::copy_states(const Step& step) {
  for (const StateCopy& c : step.state_copies) {
    for (const NodeState& ns : nodes_)
      if (ns.state.buffer)
        gpu_.copy(ns.state.buffer, c.from * ns.state_bytes, ns.state.buffer, c.to * ns.state_bytes, ns.state_bytes);
  }
}

// The value leaves the device through host-visible staging memory, the group combines it there
// (in place: no copy on the host), and it comes back. The GPU is handed what follows at once: the
// host combines a collective's value only once the next stretch (to the next collective or the
// step's end) is recorded and queued, so that the GPU goes on as soon as the value is back.
// One staging buffer serves them all: each stretch copies in only once the one before it resumed.
void VkGraphRunner::collective(int i, const Ctx& c) {
  const auto& ln = graph_.nodes[i];
  const int64_t n = c.n_tokens * ln.width;
  const VkBuffer src = out(ln.inputs[0]), dst = out(i);
  if (!group_) {
    if (src != dst) gpu_.copy(src, 0, dst, 0, n * sizeof(float));
    return;
  }
  const int64_t in_n = c.n_tokens * graph_.nodes[ln.inputs[0]].width;
  gpu_.copy(src, 0, staging_.buffer, 0, in_n * sizeof(float));
  gpu_.barrier();
  const uint64_t ready = gpu_.hand_off();
  gpu_.copy(staging_.buffer, 0, dst, 0, n * sizeof(float));
  combine_pending();
  pending_ = Pending{i, ready, c.n_tokens};
}

// The host's part of the collective before the latest: its value, once the GPU has written it,
// combined with the group's.
void VkGraphRunner::combine_pending() {
  if (!pending_) return;
  const Pending p = *pending_;
  pending_.reset();
  const auto& ln = graph_.nodes[p.node];
  gpu_.wait_for(p.ready);
  auto* host = static_cast<float*>(staging_.mapped);
  const auto ts = Clock::now();
  if (ln.op == LocalOp::AllReduce) {
    group_->all_reduce_sum(host, static_cast<size_t>(p.n_tokens * ln.width));
  } else {
    all_gather_rows(*group_, host, ln.gather, p.n_tokens, ln.width, gather_tmp_, host);
  }
  const double s = std::chrono::duration<double>(Clock::now() - ts).count();
  stats_.collective_seconds += s;
  if (!gpu_.timestamps()) stats_.op_seconds[static_cast<size_t>(ln.op)] += s;  // else in its GPU span
  gpu_.resume(p.ready);
}

// The output matmul over the rows whose logits are wanted only, in passes of logits_rows_ rows,
// each pass's logits copied to the readback buffer.
void VkGraphRunner::logits(const Ctx& c) {
  const int o = graph_.output;
  const auto& ln = graph_.nodes[o];
  const NodeState& ns = nodes_[o];
  const int64_t k = graph_.nodes[ln.inputs[0]].width, nv = ln.width;
  const int64_t n_rows = static_cast<int64_t>(c.l.out_rows.size());
  for (int64_t r0 = 0; r0 < n_rows; r0 += logits_rows_) {
    const int64_t nr = std::min(logits_rows_, n_rows - r0);
    if (nv == 0) break;
    if (ns.w.cols == 0) {
      gpu_.fill_zero(logits_.buffer, 0, nr * nv * sizeof(float));
    } else {
      std::vector<VkBufferCopy> rows;
      for (int64_t r = 0; r < nr; ++r)
        rows.push_back({static_cast<VkDeviceSize>(c.l.out_rows[r0 + r] * k * sizeof(float)),
                        static_cast<VkDeviceSize>(r * k * sizeof(float)),
                        static_cast<VkDeviceSize>(k * sizeof(float))});
      gpu_.copy_regions(out(ln.inputs[0]), logits_in_.buffer, rows);
      record_matmul(ns.w, logits_in_.buffer, nr, logits_.buffer, nv, 0, nr, dummy_.buffer);
      if (ns.bias.buffer)
        record_elementwise(logits_.buffer, ns.bias.buffer, logits_.buffer, u32(nr * nv), u32(nv), kBias);
    }
    gpu_.copy(logits_.buffer, 0, readback_.buffer, r0 * nv * sizeof(float), nr * nv * sizeof(float));
    gpu_.barrier();
  }
}

}  // namespace weft::device::vk
