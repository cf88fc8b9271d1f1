// The KV cache of a sliding-window layer holds a slot's recent positions only: rows 0.. of a slot
// hold positions base.. in order. When a step would write past its rows, the last n_swa - 1
// positions before the step move to the front and base follows them, so a window never wraps (the
// attention kernels read each key run contiguously) and the move costs at most one row per token
// on average. Devices and the engine apply the same functions to the same steps, so they agree on
// every slot's base without a message.
#pragma once

#include <algorithm>
#include <cstdint>

namespace weft::graph {

// Rows per slot: the context when it is short, else room for twice the window and two steps.
inline int64_t kv_window_rows(int64_t n_ctx, int64_t n_swa, int64_t max_tokens) {
  return std::min(n_ctx, 2 * (n_swa + max_tokens));
}

// The slot's base once a step has written positions [pos0, pos_end) (pos0 at or above the floor).
inline int64_t next_kv_window_base(int64_t base, int64_t pos0, int64_t pos_end, int64_t n_swa, int64_t rows) {
  if (pos_end - base <= rows) return base;
  return std::max<int64_t>(base, pos0 - n_swa + 1);
}

// The first position a sequence can continue from (its window's keys still held): 0 while the
// slot has never moved, else base + n_swa - 1. Below it, only starting over at 0.
inline int64_t kv_window_floor(int64_t base, int64_t n_swa) { return base == 0 ? 0 : base + n_swa - 1; }

}  // namespace weft::graph
