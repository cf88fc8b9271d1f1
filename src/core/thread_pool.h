// A persistent pool: threads are created once and reused for every op of every token.
// The calling thread takes part as thread 0, so a pool of n threads starts n-1 workers.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace weft {

struct Placement {
  std::vector<int> cpus;  // cores to pin thread i to (cpus[i % size]); empty: not pinned
  int numa_node = -1;     // memory node for this pool's allocations; -1: any
};

// Pin the calling thread to one core; returns false (and does nothing) where not allowed.
bool pin_current_thread(int cpu);
int hardware_cores();

class ThreadPool {
 public:
  // spin: whether idle threads busy-wait briefly before sleeping. Only worth it when every
  // thread of every pool has a core of its own; otherwise spinning steals the core of a peer.
  ThreadPool(int n_threads, Placement placement = {}, bool spin = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(ith, nth) once for every ith < nth = size() and returns when all are done. Any
  // thread, the caller included, may run any ith (the caller takes those no worker has claimed).
  void run(const std::function<void(int ith, int nth)>& fn);
  // Splits [0, n) into contiguous chunks, one per thread, aligned to `align` items.
  void parallel_for(int64_t n, int64_t align, const std::function<void(int64_t begin, int64_t end)>& fn);
  // The same split, in chunks of `chunk` items (a multiple of align) that each thread takes from the
  // front of its own range and, once that is empty, from the back of the others': a thread that runs
  // slower (a core shared with another tenant, an efficiency core, a late wake) hands the rest of
  // its range to the faster ones instead of making them wait, and each thread still streams
  // through contiguous memory. fn may run several times per thread, on ranges in any order.
  void parallel_steal(int64_t n, int64_t chunk, const std::function<void(int64_t begin, int64_t end)>& fn);
  // A chunk for parallel_steal: about 1/per_thread of each thread's share of n, a multiple of
  // align and at least align.
  int64_t steal_chunk(int64_t n, int64_t align, int64_t per_thread) const {
    const int64_t want = n / (int64_t{n_threads_} * per_thread) / align * align;
    return want > align ? want : align;
  }

 private:
  void worker_loop(int ith);

  // parallel_steal's chunks of thread i: [front, back) in one word (front low, back high), so that
  // its owner taking the front and a thief taking the back cannot both take the last one.
  struct alignas(64) StealRange {
    std::atomic<uint64_t> word{0};
  };

  int n_threads_;
  bool spin_;
  std::unique_ptr<StealRange[]> ranges_;  // one per thread, reused by every call
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// fn(i) for every i < n (a token's row, say): inline for one (microseconds: not worth waking the
// pool), else spread over the pool in contiguous chunks, a quarter of a thread's share each.
template <class Fn>
void for_each_index(ThreadPool& pool, int64_t n, Fn&& fn) {
  if (n == 1) return fn(int64_t{0});
  pool.parallel_steal(n, pool.steal_chunk(n, 1, 4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

// Range of chunk ith of nth over [0, n), chunk starts aligned to `align`.
inline std::pair<int64_t, int64_t> split_range(int64_t n, int64_t align, int ith, int nth) {
  const int64_t units = (n + align - 1) / align;
  const int64_t b = units * ith / nth * align, e = units * (ith + 1) / nth * align;
  return {b < n ? b : n, e < n ? e : n};
}

}  // namespace weft
