#version 450
// y = W x for one weight type (TYPE, see blocks.glsl), one workgroup per NUM_ROWS output rows and
// tile of TILE input rows; a subgroup's lanes split each row's blocks, and their partial sums are
// added across the subgroup.
// Quantized types read activations already quantized (quantize.comp); float types read x.
// MODE 0: dense: weight row w_row0 + r of this buffer gives output column y_row0 + r, r < rows.
// MODE 1: experts (gate/up): slot t * n_used + j of token t gets W[expert e_tj] x[t] when this
//         buffer holds e_tj (y zero-filled before).
// MODE 2: experts' down and weighted sum: y[t] += sum_j weight_tj W[e_tj] x[t * n_used + j].
// With has_bias, modes 1 and 2 add expert e's bias (gpt-oss) to W[e] x before any weight scales it:
// bias[bias_expert0 + e - expert_first][rows], this buffer's experts among the node's.
#include "common.glsl"
#extension GL_KHR_shader_subgroup_arithmetic : require
#if defined(INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
#extension GL_KHR_shader_subgroup_shuffle : require
#define TILE 4
// The workgroup and the rows it computes, chosen per device (VkGraphRunner::record_matmul). Decode:
// each of the workgroup's subgroups takes whole rows (a subgroup's lanes split a row's blocks and
// add their sums by subgroupAdd, no barrier), so that a GPU holds several subgroups a workgroup
// (an NVIDIA SM keeps at most 32 workgroups: one subgroup each would fill half of it).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NUM_ROWS = 1;
// Prompts and batches: each thread computes one input row's (token's) outputs over whole weight
// rows, the workgroup's threads taking consecutive tokens of the same NUM_ROWS rows: every thread
// of a subgroup reads the same weight block at once (one load for all), and no partial sums need
// adding across threads.
layout(constant_id = 2) const bool BY_ITEM = false;
// Decode, types whose blocks split into parts (blocks.glsl's BLOCK_PARTS): each thread takes one
// part, and each aligned run of BLOCK_PARTS threads (one block) adds its parts' integer sums by
// shuffles (exact), its first thread scaling the block. Needs subgroups of BLOCK_PARTS or more.
layout(constant_id = 3) const bool SPLIT = false;
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

// The weight row, input row, weight and bias of item i's j-th term; false where this buffer lacks
// its expert.
bool term(uint r, uint item, uint j, out uint w_row, out uint x_row, out float weight, out float b) {
  w_row = p.w_row0 + r;
  x_row = item;
  weight = 1.0;
  b = 0.0;
  if (p.mode == 0) return true;
  const uint t = p.mode == 1 ? item / p.n_used : item;
  const uint jj = p.mode == 1 ? item % p.n_used : j;
  const int e = int(routes[t * 2 * p.n_used + jj]) - int(p.expert_first);
  if (e < 0 || e >= int(p.n_experts)) return false;
  w_row = uint(e) * p.rows + r;
  x_row = p.mode == 1 ? t : t * p.n_used + jj;
  if (p.mode == 2) weight = routes[t * 2 * p.n_used + p.n_used + jj];
  if (p.has_bias != 0) b = bias[(p.bias_expert0 + uint(e)) * p.rows + r];
  return true;
}

void main_by_item() {
  const uint n_items = p.mode == 1 ? p.n_tok * p.n_used : p.n_tok;
  const uint item = gl_WorkGroupID.y * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (item >= n_items) return;
  const uint nb = p.cols / QK;
  const uint n_inner = p.mode == 2 ? p.n_used : 1;
  for (uint k = 0; k < NUM_ROWS; ++k) {
    const uint r = gl_WorkGroupID.x * NUM_ROWS + k;
    if (r >= p.rows) break;
    float acc = 0.0;
    bool held = false;
    for (uint j = 0; j < n_inner; ++j) {
      uint w_row, x_row;
      float weight, bias_v;
      if (!term(r, item, j, w_row, x_row, weight, bias_v)) continue;
      held = true;
      float s = 0.0;
      for (uint b = 0; b < nb; ++b) s += block_dot(w_row, b, x_row);
      acc += weight * (s + bias_v);
    }
    if (p.mode == 0) y[item * p.y_stride + p.y_row0 + r] = acc;
    else if (p.mode == 1) {
      if (held) y[item * p.rows + r] = acc;
    } else y[item * p.rows + r] += acc;
  }
}

void main() {
  if (BY_ITEM) {
    main_by_item();
    return;
  }
  // The subgroup's lanes (the last subgroup of a workgroup smaller than a subgroup has fewer).
  const uint lane = gl_SubgroupInvocationID,
             width = min(gl_SubgroupSize, gl_WorkGroupSize.x - gl_SubgroupID * gl_SubgroupSize);
  const uint n_items = p.mode == 1 ? p.n_tok * p.n_used : p.n_tok;  // rows of y this dispatch fills
  const uint item0 = gl_WorkGroupID.y * TILE;
  const uint nb = p.cols / QK;
  const uint n_inner = p.mode == 2 ? p.n_used : 1;
  for (uint k = gl_SubgroupID; k < NUM_ROWS; k += gl_NumSubgroups) {
    const uint r = gl_WorkGroupID.x * NUM_ROWS + k;
    if (r >= p.rows) break;
    float acc[TILE];
    [[unroll]] for (uint i = 0; i < TILE; ++i) {
      acc[i] = 0.0;
      if (item0 + i < n_items) {
        for (uint j = 0; j < n_inner; ++j) {
          uint w_row, x_row;
          float weight, bias_v;
          if (!term(r, item0 + i, j, w_row, x_row, weight, bias_v)) continue;
          float s = lane == 0 ? bias_v : 0.0;  // the bias once, in the first lane's part of the sum
#if defined(BLOCK_PARTS)
          if (SPLIT) {
            for (uint q = lane; q < nb * BLOCK_PARTS; q += width) {
              const uint b = q / BLOCK_PARTS, part = q % BLOCK_PARTS;
              ivec2 v = block_part(w_row, b, x_row, part);
              [[unroll]] for (uint m = 1; m < BLOCK_PARTS; m <<= 1) v += subgroupShuffleXor(v, m);
              if (part == 0) s += block_total(w_row, b, x_row, v);
            }
          } else
#endif
            for (uint b = lane; b < nb; b += width) s += block_dot(w_row, b, x_row);
          acc[i] += weight * s;
        }
      }
    }
    float sums[TILE];
    [[unroll]] for (uint i = 0; i < TILE; ++i) sums[i] = subgroupAdd(acc[i]);
    if (subgroupElect()) {
      [[unroll]] for (uint i = 0; i < TILE; ++i) {
        const uint item = item0 + i;
        if (item >= n_items) break;
        if (p.mode == 0) y[item * p.y_stride + p.y_row0 + r] = sums[i];
        else if (p.mode == 1) {
          uint w_row, x_row;
          float weight, bias_v;
          if (term(r, item, 0, w_row, x_row, weight, bias_v)) y[item * p.rows + r] = sums[i];
        } else y[item * p.rows + r] += sums[i];
      }
    }
  }
}
