// The dispatching float ops (rms_norm, softmax, swiglu, add), GEGLU, and the choice of ISA table.
// rope lives in ops_rope.cpp, attention in ops_attention.cpp, the tables in ops_{ref,avx2,avx512}.cpp.
#include "kernels/ops.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/isa.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <vector>

namespace weft::kernels {

namespace {

// Null until first use; force_ops_isa may replace it (tests), so it is atomic.
std::atomic<const OpsKernels*> g_active{nullptr};

}  // namespace

const OpsKernels* ops_kernels_for_isa(Isa isa) {
  static constexpr std::array<const OpsKernels& (*)(), kIsaCount> kTables = {
      detail::ops_table<Isa::Scalar>, detail::ops_table<Isa::Avx2>, detail::ops_table<Isa::Avx512>};
  return isa_supported(isa) ? &kTables[static_cast<int>(isa)]() : nullptr;
}

const OpsKernels& ops_kernels() {
  const OpsKernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    // One detection for every kernel family (detected_isa), so WEFT_MAX_ISA caps these ops too.
    k = find_best(ops_kernels_for_isa);
    g_active.store(k, std::memory_order_release);
  }
  return *k;
}

void force_ops_isa(Isa isa) {
  const OpsKernels* k = ops_kernels_for_isa(isa);
  if (!k) fail("kernels", "ops ISA '{}' is not supported by this CPU", isa_name(isa));
  g_active.store(k, std::memory_order_release);
}

void rms_norm(const float* x, const float* w, float* y, int64_t n_tokens, int64_t n, float eps) {
  WEFT_ASSERT(n > 0 && n_tokens >= 0);
  const OpsKernels& k = ops_kernels();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float mean_sq = k.sum_sq(x + t * n, n) / static_cast<float>(n);
    k.scale_mul(x + t * n, 1.0f / std::sqrt(mean_sq + eps), w, y + t * n, n);
  }
}

void rms_norm_heads(float* x, const float* w, int64_t n_tokens, int64_t n_heads, int64_t head_dim, float eps) {
  // Each head of each token is one row of the plain rms_norm.
  rms_norm(x, w, x, n_tokens * n_heads, head_dim, eps);
}

void softmax(float* x, int64_t n) {
  WEFT_ASSERT(n > 0);
  const OpsKernels& k = ops_kernels();
  const float m = k.max(x, n);  // subtracting the max keeps exp() from overflowing
  const float sum = k.exp_sum(x, m, n);
  k.scale(x, 1.0f / sum, n);
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) { ops_kernels().swiglu(gate, up, out, n); }

void scale_row(float* x, float s, int64_t n) { ops_kernels().scale(x, s, n); }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

const uint16_t* gelu_f16_table() {
  static const std::vector<uint16_t> table = [] {  // GELU of every half, as a half
    std::vector<uint16_t> t(1 << 16);
    for (size_t i = 0; i < t.size(); ++i) t[i] = f32_to_fp16(gelu_tanh(fp16_to_f32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table.data();
}

void geglu(const float* gate, const float* up, float* out, int64_t n) { ops_kernels().geglu(gate, up, out, n); }

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {  // in float, as ggml's CPU backend: the same bits
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    out[i] = x / (1.f + std::exp(alpha * (-x))) * (y + 1.f);
  }
}

void add_inplace(float* y, const float* x, int64_t n) { ops_kernels().add(y, x, n); }

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) { ops_kernels().to_f16(x, y, n); }

}  // namespace weft::kernels
