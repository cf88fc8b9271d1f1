#version 450
// Y = W X for prompts and batches, the legacy types (blocks.glsl's split rows, TYPE_Q4_0 .. Q8_0),
// dense (matmul.comp's MODE 0): a workgroup of 256 threads computes a tile of BM weight rows by
// BN input rows, each thread 4 x 4 of them. Each pass over KB blocks of every row loads the tile's
// weight blocks (decoded to signed bytes) and activation blocks into shared memory once, for all
// the products that read them, where matmul.comp's BY_ITEM reads a weight block once a thread.
// Each output adds its blocks in order, with the same block values as matmul.comp (block_value):
// the same sums, bit for bit.
#include "common.glsl"
#if defined(INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer AQ { int8_t aq[]; };
layout(std430, binding = 3) readonly buffer AD { float ad[]; };
layout(std430, binding = 4) readonly buffer AS { float as_[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(std430, binding = 6) readonly buffer R { float routes[]; };
layout(std430, binding = 7) readonly buffer BI { float bias[]; };
layout(push_constant) uniform P {
  uint rows, cols, n_tok, mode, n_used, expert_first, n_experts, y_row0, w_row0, y_stride, has_bias, bias_expert0;
} p;
#include "blocks.glsl"
#define BM 64
#define BN 64
#define KB 4
// Entry kb * BM + r (weights) or kb * BN + t (activations); 9 words a row of words so that the
// 16 threads reading 16 input rows' words at once read 16 banks.
shared int sw[KB * BM][9];
shared float sd[KB * BM], sm[KB * BM];
shared int sa[KB * BN][9];
shared float sad[KB * BN], sas[KB * BN];

void main() {
  const uint tid = gl_LocalInvocationID.x, tx = tid % 16, ty = tid / 16;
  const uint row0 = gl_WorkGroupID.x * BM, tok0 = gl_WorkGroupID.y * BN;
  const uint nb = p.cols / QK;
  precise float acc[4][4];
  [[unroll]] for (uint i = 0; i < 4; ++i)
    [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (uint k0 = 0; k0 < nb; k0 += KB) {
    const uint kn = min(KB, nb - k0);
    {  // this thread's entry of each: row (or input row) tid / KB, block k0 + tid % KB
      const uint lr = tid / KB, kb = tid % KB, e = kb * BM + lr;
      if (kb < kn && row0 + lr < p.rows) {
        int q[8];
        float d, m;
        block_words(p.w_row0 + row0 + lr, k0 + kb, q, d, m);
        [[unroll]] for (uint k = 0; k < 8; ++k) sw[e][k] = q[k];
        sd[e] = d;
        sm[e] = m;
      }
      if (kb < kn && tok0 + lr < p.n_tok) {
        const uint ab = (tok0 + lr) * nb + k0 + kb;
        const ivec4 x0 = aq128[2 * ab], x1 = aq128[2 * ab + 1];
        [[unroll]] for (uint k = 0; k < 4; ++k) {
          sa[e][k] = x0[k];
          sa[e][4 + k] = x1[k];
        }
        sad[e] = ad[ab];
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
        sas[e] = as_[ab];
#else
        sas[e] = 0.0;
#endif
      }
    }
    barrier();
    for (uint kb = 0; kb < kn; ++kb) {
      [[unroll]] for (uint i = 0; i < 4; ++i) {
        const uint er = kb * BM + ty + 16 * i;
        int q[8];
        [[unroll]] for (uint k = 0; k < 8; ++k) q[k] = sw[er][k];
        [[unroll]] for (uint j = 0; j < 4; ++j) {
          const uint et = kb * BN + tx + 16 * j;
          const ivec4 x0 = ivec4(sa[et][0], sa[et][1], sa[et][2], sa[et][3]),
                      x1 = ivec4(sa[et][4], sa[et][5], sa[et][6], sa[et][7]);
          acc[i][j] += block_value(q, sd[er], sm[er], x0, x1, sad[et], sas[et]);
        }
      }
    }
    barrier();
  }
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const uint r = row0 + ty + 16 * i;
    if (r >= p.rows) continue;
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint t = tok0 + tx + 16 * j;
      if (t < p.n_tok) y[t * p.y_stride + p.y_row0 + r] = acc[i][j];
    }
  }
}
