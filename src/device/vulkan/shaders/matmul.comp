#version 450
// y = W x for one weight type (TYPE, see blocks.glsl), one workgroup per output row and tile of
// TILE input rows; its threads split the row's blocks and add their partial sums in shared memory.
// Quantized types read activations already quantized (quantize.comp); float types read x.
// MODE 0: dense: weight row w_row0 + r of this buffer gives output column y_row0 + r.
// MODE 1: experts (gate/up): slot t * n_used + j of token t gets W[expert e_tj] x[t] when this
//         buffer holds e_tj (y zero-filled before).
// MODE 2: experts' down and weighted sum: y[t] += sum_j weight_tj W[e_tj] x[t * n_used + j].
#include "common.glsl"
#define TILE 4
layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer AQ { int8_t aq[]; };
layout(std430, binding = 3) readonly buffer AD { float ad[]; };
layout(std430, binding = 4) readonly buffer AS { float as_[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(std430, binding = 6) readonly buffer R { float routes[]; };
layout(push_constant) uniform P {
  uint rows, cols, n_tok, mode, n_used, expert_first, n_experts, y_row0, w_row0, y_stride;
} p;
#include "blocks.glsl"
shared float partial[TILE][64];

void main() {
  const uint r = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
  const uint n_items = p.mode == 1 ? p.n_tok * p.n_used : p.n_tok;  // rows of y this dispatch fills
  const uint item0 = gl_WorkGroupID.y * TILE;
  const uint nb = p.cols / QK;
  float acc[TILE];
  for (uint i = 0; i < TILE; ++i) acc[i] = 0.0;
  const uint n_inner = p.mode == 2 ? p.n_used : 1;
  for (uint i = 0; i < TILE; ++i) {
    const uint item = item0 + i;
    if (item >= n_items) break;
    for (uint j = 0; j < n_inner; ++j) {
      uint w_row = p.w_row0 + r, x_row = item;
      float weight = 1.0;
      if (p.mode != 0) {
        const uint t = p.mode == 1 ? item / p.n_used : item;
        const uint jj = p.mode == 1 ? item % p.n_used : j;
        const int e = int(routes[t * 2 * p.n_used + jj]) - int(p.expert_first);
        if (e < 0 || e >= int(p.n_experts)) continue;
        w_row = uint(e) * p.rows + r;
        x_row = p.mode == 1 ? t : t * p.n_used + jj;
        weight = p.mode == 2 ? routes[t * 2 * p.n_used + p.n_used + jj] : 1.0;
      }
      float s = 0.0;
      for (uint b = tid; b < nb; b += 64) s += block_dot(w_row, b, x_row);
      acc[i] += weight * s;
    }
  }
  for (uint i = 0; i < TILE; ++i) partial[i][tid] = acc[i];
  barrier();
  for (uint h = 32; h > 0; h >>= 1) {
    if (tid < h)
      for (uint i = 0; i < TILE; ++i) partial[i][tid] += partial[i][tid + h];
    barrier();
  }
  if (tid >= TILE) return;
  const uint item = item0 + tid;
  if (item >= n_items) return;
  if (p.mode == 0) y[item * p.y_stride + p.y_row0 + r] = partial[tid][0];
  else if (p.mode == 1) {
    const uint t = item / p.n_used, jj = item % p.n_used;
    const int e = int(routes[t * 2 * p.n_used + jj]) - int(p.expert_first);
    if (e >= 0 && e < int(p.n_experts)) y[item * p.rows + r] = partial[tid][0];
  } else y[item * p.rows + r] += partial[tid][0];
}
