// The streaming read that decode's bandwidth is measured against: a sum of every 64-bit word of a
// buffer on 2 MiB pages (as the weights are: on 4 KiB pages the TLB misses cost another 5-15%),
// split over a pool of threads as a matvec splits its rows. It is BM_read in the microbenchmarks and
// `weft bench --roofline`'s probe between decoded tokens: the DRAM bandwidth of a shared VM swings by
// up to 2x within minutes, so a decode is only comparable with a read taken beside it.
#pragma once

#include "core/huge_buffer.h"
#include "core/thread_pool.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

// The last-level cache's bytes as the system reports them; 0 where it does not.
size_t last_level_cache_bytes();

// Bytes a read must walk so that nearly all of them come from DRAM, as a decode's weights do: 8x
// the last-level cache and at least 256 MiB. A 64 MiB buffer beside a 32 MiB L3 read at 41-47
// GiB/s with two threads where 256 MiB read at 31-33 (and a 264 MiB matvec at 31-33).
size_t dram_stream_bytes();

class StreamRead {
 public:
  // A buffer of `bytes` (rounded down to whole windows of 4 KiB), read `windows` at a time: each
  // read() takes the next window, cycling, so a window comes back only after the others (and
  // whatever ran between the reads) have been through the caches. The pool does not spin: it
  // must not take cores from the work measured between reads.
  StreamRead(int threads, size_t bytes, int windows = 1);

  // Reads the next window; returns its bytes per second.
  double read();
  size_t window_bytes() const { return window_words_ * 8; }
  int threads() const { return pool_.size(); }

 private:
  HugeBuffer buffer_;
  ThreadPool pool_;
  size_t window_words_ = 0;
  int windows_ = 1, next_ = 0;
  std::vector<uint64_t> sums_;  // one per thread, a cache line apart
};

}  // namespace weft
