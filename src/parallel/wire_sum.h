// Sums over the ranks of a shared-memory group (shm_group, host_shm), as the wire type would
// leave them: each rank's value is rounded to the wire type once, the sum runs in f32 in rank
// order, so every rank of a group gets bit-identical results.
#pragma once

#include "parallel/wire_type.h"

#include <cstddef>

namespace weft::parallel {

// For i in [0, len): sum over ranks k < n_src of srcs[k][i] (each rounded to the wire type),
// written to every dsts[j][i], j < n_dst. srcs and dsts may be the same buffers.
void sum_into(WireType w, const float* const* srcs, int n_src, float* const* dsts, int n_dst, size_t len);

}  // namespace weft::parallel
