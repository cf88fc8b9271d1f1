#version 450
// llama.cpp's gating functions, one thread per token (kernels::moe_route). SOFTMAX (selected = 0):
// p = softmax(logits), the k experts of highest p (ties to the lower id) in descending order, as
// ids then their p as weights. SOFTMAX_WEIGHT (selected = 1, gpt-oss): the k experts of highest
// logit, their weights a softmax over those k logits. Either way divided by their sum, clamped to
// >= 2^-14, when norm; then each times its expert's scale (ones where the model has none). Expert
// counts are small: a thread walks them k times.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) buffer R { float routes[]; };
layout(std430, binding = 2) readonly buffer S { float expert_scale[]; };
layout(push_constant) uniform P { uint n_tokens, n_expert, k, norm, selected; } p;
void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= p.n_tokens) return;
  const uint base = t * p.n_expert, out_base = t * 2 * p.k;
  float mx = logits[base];
  for (uint e = 1; e < p.n_expert; ++e) mx = max(mx, logits[base + e]);
  float sum = 0.0;
  if (p.selected == 0)
    for (uint e = 0; e < p.n_expert; ++e) sum += exp(logits[base + e] - mx);
  uint prev_best = 0xFFFFFFFFu;
  float prev_p = 1.0 / 0.0;
  for (uint j = 0; j < p.k; ++j) {
    // The next in (score descending, id ascending) order after (prev_p, prev_best).
    int best = -1;
    float best_p = 0.0;
    for (uint e = 0; e < p.n_expert; ++e) {
      const float l = logits[base + e];
      const float pe = p.selected != 0 ? l : exp(l - mx) / sum;
      const bool after = pe < prev_p || (pe == prev_p && e > prev_best);
      if (after && (best < 0 || pe > best_p)) {
        best = int(e);
        best_p = pe;
      }
    }
    routes[out_base + j] = float(best);
    routes[out_base + p.k + j] = best_p;
    prev_best = uint(best);
    prev_p = best_p;
  }
  const uint w = out_base + p.k;
  if (p.selected != 0) {
    const float top = routes[w];  // the largest selected logit: the softmax's max
    float s = 0.0;
    for (uint j = 0; j < p.k; ++j) {
      routes[w + j] = exp(routes[w + j] - top);
      s += routes[w + j];
    }
    for (uint j = 0; j < p.k; ++j) routes[w + j] *= 1.0 / s;
  }
  if (p.norm != 0) {
    float picked_sum = 0.0;
    for (uint j = 0; j < p.k; ++j) picked_sum += routes[w + j];
    for (uint j = 0; j < p.k; ++j) routes[w + j] /= max(picked_sum, 6.103515625e-5);
  }
  for (uint j = 0; j < p.k; ++j) routes[w + j] *= expert_scale[uint(routes[out_base + j])];
}
