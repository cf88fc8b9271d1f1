#version 450
// llama.cpp's gating functions, one thread per token (kernels::moe_route). SOFTMAX (selected = 0):
// p = softmax(logits); SOFTMAX_WEIGHT (selected = 1, gpt-oss): p = the logits, the chosen ones'
// weights then a softmax over those k; SIGMOID (sigmoid = 1, DeepSeek V3): p = sigmoid(logits).
// The k experts of highest selection score (ties to the lower id) in descending order, as ids, then
// their p as weights. The selection score is p, plus the selection bias where has_bias, and -inf
// outside the n_groups_used best expert groups where n_groups > 1 (a group's score: its two best).
// Weights divided by their sum, clamped to >= 2^-14, when norm; times weights_scale when it is
// positive; then each times its expert's scale (ones where the model has none). Expert counts are
// small: a thread walks them k times.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) buffer R { float routes[]; };
layout(std430, binding = 2) readonly buffer S { float expert_scale[]; };
layout(std430, binding = 3) readonly buffer B { float selection_bias[]; };
layout(push_constant) uniform P {
  uint n_tokens, n_expert, k, norm, selected, sigmoid, has_bias, n_groups, n_groups_used;
  float weights_scale;
} p;
const float NEG_INF = -1.0 / 0.0;
float mx_, sum_;
uint base_;
bool kept_[64];  // kernels::kMaxGroups
float prob(uint e) {
  const float l = logits[base_ + e];
  if (p.sigmoid != 0) return 1.0 / (1.0 + exp(-l));
  return p.selected != 0 ? l : exp(l - mx_) / sum_;
}
float biased(uint e) { return prob(e) + (p.has_bias != 0 ? selection_bias[e] : 0.0); }
float score(uint e) {
  if (p.n_groups > 1 && !kept_[e / (p.n_expert / p.n_groups)]) return NEG_INF;
  return biased(e);
}
void main() {
  const uint t = gl_GlobalInvocationID.x;
  if (t >= p.n_tokens) return;
  base_ = t * p.n_expert;
  const uint out_base = t * 2 * p.k;
  mx_ = logits[base_];
  for (uint e = 1; e < p.n_expert; ++e) mx_ = max(mx_, logits[base_ + e]);
  sum_ = 0.0;
  if (p.selected == 0 && p.sigmoid == 0)
    for (uint e = 0; e < p.n_expert; ++e) sum_ += exp(logits[base_ + e] - mx_);
  if (p.n_groups > 1) {  // the best groups by their two best scores, ties to the lower group
    const uint per = p.n_expert / p.n_groups;
    float group_score[64];
    for (uint g = 0; g < p.n_groups; ++g) {
      uint best = g * per;
      for (uint e = g * per + 1; e < (g + 1) * per; ++e)
        if (biased(e) > biased(best)) best = e;
      float second = NEG_INF;
      for (uint e = g * per; e < (g + 1) * per; ++e)
        if (e != best) second = max(second, biased(e));
      group_score[g] = per > 1 ? biased(best) + second : biased(best);
      kept_[g] = false;
    }
    for (uint u = 0; u < p.n_groups_used; ++u) {
      int best = -1;
      for (uint g = 0; g < p.n_groups; ++g)
        if (!kept_[g] && (best < 0 || group_score[g] > group_score[best])) best = int(g);
      kept_[best] = true;
    }
  }
  uint prev_best = 0xFFFFFFFFu;
  float prev_s = 1.0 / 0.0;
  for (uint j = 0; j < p.k; ++j) {
    // The next in (score descending, id ascending) order after (prev_s, prev_best).
    int best = -1;
    float best_s = 0.0;
    for (uint e = 0; e < p.n_expert; ++e) {
      const float s = score(e);
      const bool after = s < prev_s || (s == prev_s && e > prev_best);
      if (after && (best < 0 || s > best_s)) {
        best = int(e);
        best_s = s;
      }
    }
    routes[out_base + j] = float(best);
    routes[out_base + p.k + j] = prob(uint(best));  // weighted by p, not by the biased score
    prev_best = uint(best);
    prev_s = best_s;
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
  if (p.weights_scale > 0.0)
    for (uint j = 0; j < p.k; ++j) routes[w + j] *= p.weights_scale;
  for (uint j = 0; j < p.k; ++j) routes[w + j] *= expert_scale[uint(routes[out_base + j])];
}
