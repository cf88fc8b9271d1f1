// Rotary position embedding parameters: model data (read from GGUF by src/model, carried in the
// graph's Dims, sent to workers) that the rope kernels (src/kernels/ops.h) consume. They live in
// core because both the graph layer and the kernels need them and neither sits above the other.
#pragma once

#include <cstdint>
#include <vector>

namespace weft {

struct RopeParams {
  int64_t n_rot = 0;  // rotated dims per head (<= head_dim); the rest pass through
  float freq_base = 10000.f;
  float freq_scale = 1.f;  // linear scaling: positions multiplied by this
  bool neox = false;       // NeoX style pairs (i, i + n_rot/2) instead of (2i, 2i+1)
  // llama3 rope scaling (rope_type "llama3"); factor 0 means off.
  float llama3_factor = 0.f;
  float llama3_low_freq_factor = 1.f;
  float llama3_high_freq_factor = 4.f;
  float llama3_original_ctx = 8192.f;
  // Per-pair frequency divisors [n_rot/2] as llama.cpp's rope_freqs tensor stores them (Llama 3.1
  // GGUFs carry llama3 scaling this way). When set they replace the llama3_* parameters.
  std::vector<float> freq_factors;
  float attn_factor = 1.f;  // cos and sin scaled by it (LongRoPE's rope.scaling.attn_factor)
  // YaRN (rope type "yarn"; ext_factor 0: off): the correction range of pairs turning beta_fast ..
  // beta_slow times over the original context mixes interpolated and extrapolated angles.
  float yarn_ext_factor = 0.f, yarn_beta_fast = 32.f, yarn_beta_slow = 1.f, yarn_orig_ctx = 0.f;
  bool operator==(const RopeParams&) const = default;
};

}  // namespace weft
