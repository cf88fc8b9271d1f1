#version 450
// The memory-bandwidth probe (vk_memory_read.h): every 16 bytes of `data` read once, as a decode
// reads its weights. Grid-stride: each pass of the whole grid reads one contiguous stretch, so
// every warp's loads are coalesced; four loads in flight per thread. The sums are written only on
// a value the fill never gives, so the reads cannot be optimised away and nothing else is written.
// With FILL, the variant that writes `data` first: a pattern that differs from word to word (a
// constant might be compressed by the memory system).
layout(local_size_x = 256) in;
#ifdef FILL
layout(std430, binding = 0) writeonly buffer Data { uvec4 data[]; };
#else
layout(std430, binding = 0) readonly buffer Data { uvec4 data[]; };
#endif
layout(std430, binding = 1) writeonly buffer Sums { uint sums[]; };
layout(push_constant) uniform P { uint n, stride; } p;  // n: uvec4s; stride: threads of the grid
void main() {
  uint i = gl_GlobalInvocationID.x;
#ifdef FILL
  for (; i < p.n; i += p.stride) data[i] = uvec4(i * 2654435761u, i ^ 0x5bd1e995u, i * 40503u + 1u, ~i);
#else
  uvec4 a0 = uvec4(0), a1 = uvec4(0), a2 = uvec4(0), a3 = uvec4(0);
  for (; i + 3 * p.stride < p.n; i += 4 * p.stride) {
    a0 += data[i];
    a1 += data[i + p.stride];
    a2 += data[i + 2 * p.stride];
    a3 += data[i + 3 * p.stride];
  }
  for (; i < p.n; i += p.stride) a0 += data[i];
  const uvec4 a = a0 ^ a1 ^ a2 ^ a3;
  const uint s = a.x + a.y + a.z + a.w;
  if (s == 0x9e3779b9u) sums[gl_WorkGroupID.x] = s;
#endif
}
