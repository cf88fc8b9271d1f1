#version 450
// llama.cpp's softmax gating, one thread per token: p = softmax(logits); the k experts of highest
// p (ties to the lower id) in descending order, as ids then weights (divided by their sum, clamped
// to >= 2^-14, when norm). Expert counts are small: a thread walks them k times.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) writeonly buffer R { float routes[]; };
layout(push_constant) uniform P { uint n_tokens, n_expert, k, norm; } p;
void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= p.n_tokens) return;
  const uint base = t * p.n_expert, out_base = t * 2 * p.k;
  float mx = logits[base];
  for (uint e = 1; e < p.n_expert; ++e) mx = max(mx, logits[base + e]);
  float sum = 0.0;
  for (uint e = 0; e < p.n_expert; ++e) sum += exp(logits[base + e] - mx);
  float picked_sum = 0.0;
  uint prev_best = 0xFFFFFFFFu;
  float prev_p = 1.0 / 0.0;
  for (uint j = 0; j < p.k; ++j) {
    // The next in (p descending, id ascending) order after (prev_p, prev_best).
    int best = -1;
    float best_p = 0.0;
    for (uint e = 0; e < p.n_expert; ++e) {
      const float pe = exp(logits[base + e] - mx) / sum;
      const bool after = pe < prev_p || (pe == prev_p && e > prev_best);
      if (after && (best < 0 || pe > best_p)) {
        best = int(e);
        best_p = pe;
      }
    }
    routes[out_base + j] = float(best);
    routes[out_base + p.k + j] = best_p;
    picked_sum += best_p;
    prev_best = uint(best);
    prev_p = best_p;
  }
  if (p.norm != 0)
    for (uint j = 0; j < p.k; ++j) routes[out_base + p.k + j] /= max(picked_sum, 6.103515625e-5);
}
