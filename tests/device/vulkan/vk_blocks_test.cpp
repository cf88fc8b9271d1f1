// The Vulkan quantize and matmul shaders against the CPU's scalar references, weight type by weight
// type, on seeded data. quantize.comp must give the CPU's activation blocks bit for bit (Q8_0, Q8_1,
// Q8_K), and each type's block_dot (blocks.glsl) the CPU's vec_dot_ref of one block exactly (exact
// integer sums, then the float scale products in the reference's order): a quantized matmul then
// differs from the CPU's only in the order a row's blocks are added. The conformance suite checks
// whole models; a wrong bit in one sub-block's scale shows there only as a logit tolerance, here as
// the value it is.
#include "core/dtype.h"
#include "core/fp16.h"
#include "device/vulkan/vk_gpu.h"
#include "device/vulkan/vk_weight_rows.h"
#include "kernels/moe.h"
#include "kernels/quants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace weft::device::vk {
namespace {

// The shaders' push constants, as vk_graph_runner.cpp's QuantizePush and MatmulPush: a change there
// is a change here.
struct QuantizePush {
  uint32_t n_values, act;
};
struct MatmulPush {
  uint32_t rows, cols, n_tok, mode, n_used, expert_first, n_experts, y_row0, w_row0, y_stride, has_bias, bias_expert0;
};

// n values whose scale changes every 32 (so blocks differ in d), and a few exact zeros.
std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  float scale = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    if (i % 32 == 0) scale = std::exp2(static_cast<float>(static_cast<int>(rng() % 9) - 4));
    v[i] = normal(rng) * scale;
    if (rng() % 97 == 0) v[i] = 0.0f;
  }
  return v;
}

// matmul.comp's and gemm.comp's push constants for y = W x, MODE 0, y's rows packed.
MatmulPush dense(int64_t rows, int64_t cols, int64_t n_tok) {
  MatmulPush p{};
  p.rows = static_cast<uint32_t>(rows);
  p.cols = static_cast<uint32_t>(cols);
  p.n_tok = static_cast<uint32_t>(n_tok);
  p.y_stride = static_cast<uint32_t>(rows);
  return p;
}

// quantize.comp's ACT for an activation type.
uint32_t act_code(DType act) { return act == DType::Q8_0 ? 0 : act == DType::Q8_1 ? 1 : 2; }

class VkBlocks : public testing::TestWithParam<DType> {
 protected:
  Gpu gpu{0};
  Buffer host(const void* data, size_t bytes) {
    Buffer b = gpu.create_buffer(bytes, Memory::Upload, "test input");
    std::memcpy(b.mapped, data, bytes);
    return b;
  }
};

// n_tok tokens of `cols` values through quantize.comp, compared with the CPU's quantize_act row by
// row: every q, d and sum (Q8_1's s, Q8_K's bsums) identical.
TEST_P(VkBlocks, QuantizeMatchesTheCpu) {
  const DType t = GetParam();
  const DType act = kernels::vec_dot_type(t);
  const int64_t qk = block_size(act), cols = 4 * 256, n_tok = 5, n = cols * n_tok, nb = n / qk;
  const std::vector<float> x = seeded(n, 1);
  Buffer xb = host(x.data(), n * 4);
  Buffer q = gpu.create_buffer(n, Memory::Readback, "q");
  Buffer d = gpu.create_buffer(nb * 4, Memory::Readback, "d");
  Buffer s = gpu.create_buffer(n / 16 * 4, Memory::Readback, "s");
  const Pipeline& p = gpu.pipeline("quantize", 4, sizeof(QuantizePush));
  const QuantizePush push{static_cast<uint32_t>(n), act_code(act)};
  gpu.begin();
  gpu.dispatch(p, gpu.bind(p, {xb.buffer, q.buffer, d.buffer, s.buffer}), &push, static_cast<uint32_t>((nb + 63) / 64));
  gpu.submit();
  std::vector<uint8_t> want(row_bytes(act, n));
  kernels::quantize_row_ref(act, x.data(), want.data(), n);
  const auto* gq = static_cast<const int8_t*>(q.mapped);
  const auto* gd = static_cast<const float*>(d.mapped);
  const auto* gs = static_cast<const float*>(s.mapped);
  const size_t bb = row_bytes(act, qk);
  int bad = 0;
  for (int64_t b = 0; b < nb && bad < 5; ++b) {
    const uint8_t* w = want.data() + b * bb;
    float wd, ws = 0;
    const int8_t* wq;
    if (act == DType::Q8_K) {  // f32 d, qs[256], int16 bsums[16]
      std::memcpy(&wd, w, 4);
      wq = reinterpret_cast<const int8_t*>(w + 4);
      for (int g = 0; g < 16; ++g) {
        int16_t bs;
        std::memcpy(&bs, w + 4 + 256 + 2 * g, 2);
        if (gs[b * 16 + g] != bs) ++bad;
        EXPECT_EQ(gs[b * 16 + g], bs) << "bsum " << g << " of block " << b;
      }
    } else {  // f16 d, (Q8_1: f16 s), qs[32]
      uint16_t h;
      std::memcpy(&h, w, 2);
      wd = fp16_to_f32(h);
      if (act == DType::Q8_1) {
        std::memcpy(&h, w + 2, 2);
        ws = fp16_to_f32(h);
        EXPECT_EQ(gs[b], ws) << "s of block " << b;
      }
      wq = reinterpret_cast<const int8_t*>(w + (act == DType::Q8_1 ? 4 : 2));
    }
    if (gd[b] != wd) ++bad;
    EXPECT_EQ(gd[b], wd) << "d of block " << b;
    for (int64_t i = 0; i < qk; ++i) {
      if (gq[b * qk + i] != wq[i]) ++bad;
      EXPECT_EQ(gq[b * qk + i], wq[i]) << "value " << i << " of block " << b;
    }
  }
  for (Buffer* b : {&xb, &q, &d, &s}) gpu.destroy(*b);
}

// y = W x through quantize.comp and the type's matmul shader, against vec_dot_ref on the CPU's own
// activation blocks. With one block a row the matmul adds nothing to the block's dot: equal bit for
// bit. With several, the shader sums the blocks in another order: equal within float rounding.
TEST_P(VkBlocks, MatmulMatchesTheCpuReference) {
  const DType t = GetParam();
  const DType act = kernels::vec_dot_type(t);
  for (const int64_t cols : {block_size(t), int64_t{256 * 6}}) {
    const int64_t rows = 37, n_tok = 6;
    const std::vector<float> wf = seeded(rows * cols, 2), x = seeded(n_tok * cols, 3);
    const size_t wrow = row_bytes(t, cols), arow = row_bytes(act, cols);
    std::vector<uint8_t> w(rows * wrow), a(n_tok * arow);
    for (int64_t r = 0; r < rows; ++r) kernels::quantize_row_ref(t, wf.data() + r * cols, w.data() + r * wrow, cols);
    for (int64_t i = 0; i < n_tok; ++i) kernels::quantize_row_ref(act, x.data() + i * cols, a.data() + i * arow, cols);
    std::vector<uint8_t> wd(rows * device_row_bytes(t, cols));  // as the device stores them
    to_device_rows(t, cols, w.data(), wrow, rows, wd.data());
    Buffer wb = host(wd.data(), wd.size()), xb = host(x.data(), x.size() * 4);
    const int64_t n = n_tok * cols;
    Buffer q = gpu.create_buffer(n, Memory::Device, "q"), d = gpu.create_buffer(n / 32 * 4, Memory::Device, "d");
    Buffer s = gpu.create_buffer(n / 16 * 4, Memory::Device, "s");
    Buffer y = gpu.create_buffer(rows * n_tok * 4, Memory::Readback, "y"),
           routes = gpu.create_buffer(4, Memory::Device, "-");
    std::vector<float> want(rows * n_tok);
    float scale = 0;  // the largest |y|: a row's sum may cancel to far less than its blocks
    for (int64_t i = 0; i < n_tok; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        want[i * rows + r] = kernels::vec_dot_ref(t, cols, w.data() + r * wrow, a.data() + i * arow);
        scale = std::max(scale, std::fabs(want[i * rows + r]));
      }
    ASSERT_GT(scale, 0.0f);
    const Pipeline& qp = gpu.pipeline("quantize", 4, sizeof(QuantizePush));
    const QuantizePush qpush{static_cast<uint32_t>(n), act_code(act)};
    const MatmulPush mpush = dense(rows, cols, n_tok);
    // The type's shader, and its integer dot product's variant where the device has the instruction.
    for (const std::string variant : {"", "_dot"}) {
      if (variant == "_dot" && !(gpu.info().integer_dot && split_rows(t))) continue;
      // The decode shape of a GPU (VkGraphRunner's matvec_shape): 4 subgroups a workgroup, a row each.
      const uint32_t sg = gpu.info().lanes();
      const Pipeline& mp =
          gpu.pipeline("matmul_" + std::string(dtype_name(t)) + variant, 8, sizeof(MatmulPush), {4 * sg, 4, 0, 0});
      gpu.begin();
      gpu.dispatch(qp, gpu.bind(qp, {xb.buffer, q.buffer, d.buffer, s.buffer}), &qpush,
                   static_cast<uint32_t>((n / block_size(act) + 63) / 64));
      gpu.barrier();
      // Mode 0 (dense): a workgroup per 4 weight rows, and in y one per token, which covers whatever
      // tile of tokens a workgroup takes.
      gpu.dispatch(
          mp,
          gpu.bind(mp, {wb.buffer, xb.buffer, q.buffer, d.buffer, s.buffer, y.buffer, routes.buffer, routes.buffer}),
          &mpush, (rows + 3) / 4, n_tok);
      gpu.submit();
      const auto* got = static_cast<const float*>(y.mapped);
      int bad = 0;
      for (int64_t i = 0; i < n_tok && bad < 5; ++i)
        for (int64_t r = 0; r < rows && bad < 5; ++r) {
          const float g = got[i * rows + r], wv = want[i * rows + r];
          const bool ok = cols == block_size(t) ? g == wv : std::fabs(g - wv) <= 1e-6f * scale;
          if (!ok) ++bad;
          EXPECT_TRUE(ok) << "matmul_" << dtype_name(t) << variant << " cols " << cols << ": row " << r << ", token "
                          << i << ": " << g << " != " << wv;
        }
    }
    for (Buffer* b : {&wb, &xb, &q, &d, &s, &y, &routes}) gpu.destroy(*b);
  }
}

// Prompts' tiled GEMM (gemm.comp, the legacy types) against matmul.comp's thread per input row
// (BY_ITEM), which it replaces on GPUs: the same sums, so the same bits, over tiles the shape
// leaves partial (rows, input rows and blocks not multiples of the tile's 64, 64 and 4), both dot
// product variants where the device has the instruction. Q4_1 and Q5_1 add two products a block
// (sumi's and the offset's), and lavapipe fuses one into a multiply-add in one shader and not in
// the other, `precise` notwithstanding: those two are held to a float rounding of the sum.
class VkGemm : public VkBlocks {};

TEST_P(VkGemm, TiledGemmGivesTheThreadPerRowMatmulsBits) {
  const DType t = GetParam();
  ASSERT_TRUE(split_rows(t));
  const DType act = kernels::vec_dot_type(t);
  const int64_t rows = 100, n_tok = 70, cols = 32 * 7, n = n_tok * cols;
  const std::vector<float> wf = seeded(rows * cols, 4), x = seeded(n, 5);
  const size_t wrow = row_bytes(t, cols);
  std::vector<uint8_t> w(rows * wrow), wd(rows * device_row_bytes(t, cols));
  for (int64_t r = 0; r < rows; ++r) kernels::quantize_row_ref(t, wf.data() + r * cols, w.data() + r * wrow, cols);
  to_device_rows(t, cols, w.data(), wrow, rows, wd.data());
  Buffer wb = host(wd.data(), wd.size()), xb = host(x.data(), x.size() * 4);
  Buffer q = gpu.create_buffer(n, Memory::Device, "q"), d = gpu.create_buffer(n / 32 * 4, Memory::Device, "d");
  Buffer s = gpu.create_buffer(n / 16 * 4, Memory::Device, "s"), routes = gpu.create_buffer(4, Memory::Device, "-");
  const Pipeline& qp = gpu.pipeline("quantize", 4, sizeof(QuantizePush));
  const QuantizePush qpush{static_cast<uint32_t>(n), act_code(act)};
  const MatmulPush mpush = dense(rows, cols, n_tok);
  const uint32_t sg = gpu.info().lanes();
  for (const std::string variant : {"", "_dot"}) {
    if (variant == "_dot" && !gpu.info().integer_dot) continue;
    const std::string name = std::string(dtype_name(t)) + variant;
    std::vector<float> got[2];
    for (int gemm = 0; gemm < 2; ++gemm) {
      Buffer y = gpu.create_buffer(rows * n_tok * 4, Memory::Readback, "y");
      const Pipeline& mp = gemm ? gpu.pipeline("gemm_" + name, 8, sizeof(MatmulPush))
                                : gpu.pipeline("matmul_" + name, 8, sizeof(MatmulPush), {sg, 4, 1, 0});
      gpu.begin();
      gpu.dispatch(qp, gpu.bind(qp, {xb.buffer, q.buffer, d.buffer, s.buffer}), &qpush,
                   static_cast<uint32_t>((n / block_size(act) + 63) / 64));
      gpu.barrier();
      const VkDescriptorSet set =
          gpu.bind(mp, {wb.buffer, xb.buffer, q.buffer, d.buffer, s.buffer, y.buffer, routes.buffer, routes.buffer});
      if (gemm)
        gpu.dispatch(mp, set, &mpush, (rows + 63) / 64, (n_tok + 63) / 64);
      else
        gpu.dispatch(mp, set, &mpush, (rows + 3) / 4, (n_tok + sg - 1) / sg);
      gpu.submit();
      const auto* out = static_cast<const float*>(y.mapped);
      got[gemm].assign(out, out + rows * n_tok);
      gpu.destroy(y);
    }
    const bool two_products = t == DType::Q4_1 || t == DType::Q5_1;
    float scale = 0;  // the largest |y|: a row's sum may cancel to far less than its blocks
    for (const float v : got[0]) scale = std::max(scale, std::fabs(v));
    int bad = 0;
    for (size_t i = 0; i < got[0].size() && bad < 5; ++i)
      if (two_products ? std::fabs(got[0][i] - got[1][i]) > 1e-6f * scale : got[0][i] != got[1][i]) {
        ++bad;
        ADD_FAILURE() << name << ": row " << i % rows << ", input row " << i / rows << ": gemm " << got[1][i]
                      << ", matmul " << got[0][i];
      }
  }
  for (Buffer* b : {&wb, &xb, &q, &d, &s, &routes}) gpu.destroy(*b);
}

// The experts' modes (matmul.comp MODE 1: gate/up, MODE 2: down and the weighted sum) with
// gpt-oss's biases, against expert_matmul_ref / expert_matmul_sum_ref on f32 weights (no activation
// rounding): each slot's bias is its own expert's, added before the route weight scales it, read
// at the buffer's experts among the node's (this buffer is the node's second part: experts 1..3 of
// its 0..4, bias_expert0 = 1), and slots of experts the buffer lacks stay zero (MODE 1) or add
// nothing (MODE 2). Both layouts: decode's (threads split a row) and prompts' (a thread per item).
TEST(VkExperts, EachSlotAddsItsExpertsBiasBeforeTheRouteWeight) {
  Gpu gpu(0);
  const int64_t n_expert = 5, k = 2, rows = 13, cols = 96, n_tok = 11;
  const int64_t first = 1, held = 3;  // the buffer's experts, global ids
  const std::vector<float> w = seeded(held * rows * cols, 4), bias = seeded(n_expert * rows, 5);
  std::vector<float> routes(n_tok * 2 * k);
  std::mt19937 rng(6);
  for (int64_t t = 0; t < n_tok; ++t) {  // k distinct experts of 0..4 (0 and 4 held elsewhere)
    const int64_t e0 = t % n_expert, e1 = (e0 + 1 + rng() % (n_expert - 1)) % n_expert;
    routes[t * 2 * k] = static_cast<float>(e0), routes[t * 2 * k + 1] = static_cast<float>(e1);
    routes[t * 2 * k + k] = 0.25f + 0.5f * static_cast<float>(rng() % 8) / 8, routes[t * 2 * k + k + 1] = 0.375f;
  }
  kernels::ExpertStack stack;
  stack.w = {DType::F32, reinterpret_cast<const uint8_t*>(w.data()), held * rows, cols, cols * sizeof(float)};
  stack.first = first, stack.n = held, stack.rows = rows;
  Buffer wb = gpu.create_buffer(w.size() * 4, Memory::Upload, "w"),
         rb = gpu.create_buffer(routes.size() * 4, Memory::Upload, "routes");
  Buffer bb = gpu.create_buffer(bias.size() * 4, Memory::Upload, "bias"),
         unused = gpu.create_buffer(4, Memory::Device, "-");
  std::memcpy(wb.mapped, w.data(), w.size() * 4);
  std::memcpy(rb.mapped, routes.data(), routes.size() * 4);
  std::memcpy(bb.mapped, bias.data(), bias.size() * 4);
  const uint32_t wg = gpu.info().lanes();
  for (const uint32_t mode : {1u, 2u}) {
    const int64_t x_rows = mode == 1 ? n_tok : n_tok * k, y_n = mode == 1 ? n_tok * k * rows : n_tok * rows;
    const std::vector<float> x = seeded(x_rows * cols, 7 + mode);
    std::vector<float> want(y_n), unbiased(y_n);
    stack.bias = bias.data() + first * rows;
    (mode == 1 ? kernels::expert_matmul_ref : kernels::expert_matmul_sum_ref)(stack, x.data(), routes.data(), k, n_tok,
                                                                              want.data());
    stack.bias = nullptr;
    (mode == 1 ? kernels::expert_matmul_ref : kernels::expert_matmul_sum_ref)(stack, x.data(), routes.data(), k, n_tok,
                                                                              unbiased.data());
    float scale = 0, bias_effect = 0;
    for (int64_t i = 0; i < y_n; ++i) {
      scale = std::max(scale, std::fabs(want[i]));
      bias_effect = std::max(bias_effect, std::fabs(want[i] - unbiased[i]));
    }
    const float tol = 1e-5f * scale;
    ASSERT_GT(bias_effect, 100 * tol) << "the biases hardly move the products: the test would not see them";
    Buffer xb = gpu.create_buffer(x.size() * 4, Memory::Upload, "x"),
           y = gpu.create_buffer(y_n * 4, Memory::Readback, "y");
    std::memcpy(xb.mapped, x.data(), x.size() * 4);
    for (const uint32_t by_item : {0u, 1u}) {
      const uint32_t n_rows = by_item ? 4 : 2, items = static_cast<uint32_t>(mode == 1 ? n_tok * k : n_tok);
      const Pipeline& p = gpu.pipeline("matmul_f32", 8, sizeof(MatmulPush), {wg, n_rows, by_item, 0});
      MatmulPush push{};
      push.rows = rows, push.cols = cols, push.n_tok = n_tok, push.mode = mode, push.n_used = k;
      push.expert_first = first, push.n_experts = held, push.y_stride = rows;
      push.has_bias = 1, push.bias_expert0 = first;  // the node's experts start at 0
      std::memset(y.mapped, 0, y_n * 4);             // what fill_zero does before the runner's expert matmuls
      gpu.begin();
      gpu.dispatch(p,
                   gpu.bind(p, {wb.buffer, xb.buffer, unused.buffer, unused.buffer, unused.buffer, y.buffer, rb.buffer,
                                bb.buffer}),
                   &push, (rows + n_rows - 1) / n_rows, by_item ? (items + wg - 1) / wg : (items + 3) / 4);
      gpu.submit();
      const auto* got = static_cast<const float*>(y.mapped);
      int bad = 0;
      for (int64_t i = 0; i < y_n && bad < 5; ++i) {
        const bool ok = std::fabs(got[i] - want[i]) <= tol;
        if (!ok) ++bad;
        EXPECT_TRUE(ok) << "mode " << mode << (by_item ? " by item" : " by row") << ": value " << i << ": " << got[i]
                        << " != " << want[i] << " (without biases " << unbiased[i] << ")";
      }
    }
    for (Buffer* b : {&xb, &y}) gpu.destroy(*b);
  }
  for (Buffer* b : {&wb, &rb, &bb, &unused}) gpu.destroy(*b);
}

INSTANTIATE_TEST_SUITE_P(Types, VkGemm,
                         testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });
INSTANTIATE_TEST_SUITE_P(Types, VkBlocks,
                         testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL,
                                         DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS,
                                         DType::MXFP4),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace weft::device::vk
