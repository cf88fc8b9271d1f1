// The shaders' f32 -> f16 rounding (common.glsl's f32_to_f16_bits: the f16 KV cache, GEGLU's table
// index, the activations' block scales) against the CPU's, on every half's value, the midpoints
// between neighbouring halves (ties go to the even one) and the floats either side of each: one bit
// off and the cache or a block scale differs from the CPU device's. Integer arithmetic in the shader,
// because NVIDIA's compiler folds unpackHalf2x16(packHalf2x16(v)) to v.
#include "core/fp16.h"
#include "device/vulkan/vk_gpu.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

namespace weft::device::vk {
namespace {

struct KvStorePush {  // vk_graph_runner.cpp's
  uint32_t n_tokens, n_kv, head_dim, n_ctx, windowed;
};

std::vector<float> hard_cases() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half, both signs
    const float f = fp16_to_f32(static_cast<uint16_t>(h)), next = fp16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = f + (next - f) / 2;  // exact: one more bit than a half holds
    for (const float x : {f, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (const float x : {65504.0f, 65519.99f, 65520.0f, 1e6f, INFINITY, 1e-30f, 2.9802322e-8f, 2.9802326e-8f}) {
    v.push_back(x);
    v.push_back(-x);
  }
  return v;
}

TEST(VkHalves, TheF16CacheRoundsEveryValueAsTheCpu) {
  Gpu gpu(0);
  const std::vector<float> x = hard_cases();
  const auto n = static_cast<uint32_t>(x.size());
  Buffer in = gpu.create_buffer(x.size() * 4, Memory::Upload, "x");
  std::memcpy(in.mapped, x.data(), x.size() * 4);
  Buffer cache = gpu.create_buffer(x.size() * 2, Memory::Readback, "cache");
  const int32_t tok[2] = {0, 0}, base[1] = {0};
  Buffer tb = gpu.create_buffer(sizeof(tok), Memory::Upload, "tok"), bb = gpu.create_buffer(4, Memory::Upload, "base");
  std::memcpy(tb.mapped, tok, sizeof(tok));
  std::memcpy(bb.mapped, base, sizeof(base));
  // One token of one KV head whose head_dim is every case: row 0 of slot 0 holds them in order.
  const Pipeline& p = gpu.pipeline("kv_store_f16", 4, sizeof(KvStorePush));
  const KvStorePush push{1, 1, n, 1, 0};
  gpu.begin();
  gpu.dispatch(p, gpu.bind(p, {in.buffer, cache.buffer, tb.buffer, bb.buffer}), &push, (n + 255) / 256);
  gpu.submit();
  const auto* got = static_cast<const uint16_t*>(cache.mapped);
  int bad = 0;
  for (uint32_t i = 0; i < n && bad < 8; ++i) {
    const uint16_t want = f32_to_fp16(x[i]);
    if (got[i] == want) continue;
    ++bad;
    ADD_FAILURE() << "f32 " << std::hex << std::bit_cast<uint32_t>(x[i]) << " (" << x[i] << "): half " << got[i]
                  << ", the CPU's " << want;
  }
  for (Buffer* b : {&in, &cache, &tb, &bb}) gpu.destroy(*b);
}

}  // namespace
}  // namespace weft::device::vk
