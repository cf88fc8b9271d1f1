#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define WEFT_PAUSE() _mm_pause()
#else
#define WEFT_PAUSE() std::this_thread::yield()
#endif

namespace weft {
namespace {
// Bounded spin before sleeping: long enough to bridge the gap between two ops of one token,
// short enough that an idle pool sleeps quickly. ~50 us where pause takes ~10 cycles; pause is
// ~140 cycles since Skylake, so up to ~1 ms there.
constexpr int kSpinIterations = 20000;

// generation_ packs (job number << kSlotBits) | next unclaimed slot. A slot is one fn(ith, nth)
// call; any thread may run any slot, claimed by a CAS on this word, so a caller whose workers
// were descheduled (more runnable threads than cores) runs their slots itself instead of
// waiting a scheduler time slice for them. The job number in the same word keeps a worker that
// wakes late from claiming a slot of a later job.
constexpr int kSlotBits = 16;
constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
inline uint64_t job_of(uint64_t word) { return word >> kSlotBits; }

// Claims and runs slots of job number `job` until none is left. *job_fn is read only after a
// successful claim: the caller cannot return while a claimed slot is unfinished, so the
// function it points to is still alive.
void run_slots(std::atomic<uint64_t>& word_atomic, std::atomic<int>& pending,
               const std::function<void(int, int)>* const& job_fn, int n_threads, uint64_t job) {
  uint64_t word = word_atomic.load(std::memory_order_acquire);
  while (job_of(word) == job && static_cast<int>(word & kSlotMask) < n_threads) {
    if (!word_atomic.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      continue;
    (*job_fn)(static_cast<int>(word & kSlotMask), n_threads);
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) pending.notify_one();
    word = word_atomic.load(std::memory_order_acquire);
  }
}

}  // namespace

bool pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

int hardware_cores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int n_threads, Placement placement, bool spin)
    : n_threads_(n_threads < 1 ? 1 : n_threads), spin_(spin) {
  if (n_threads_ > static_cast<int>(kSlotMask)) n_threads_ = static_cast<int>(kSlotMask);
  ranges_ = std::make_unique<StealRange[]>(n_threads_);
  if (!placement.cpus.empty()) pin_current_thread(placement.cpus[0]);
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i, placement] {
      if (!placement.cpus.empty()) pin_current_thread(placement.cpus[i % placement.cpus.size()]);
      worker_loop(i);
    });
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(uint64_t{1} << kSlotBits);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int) {  // any thread runs any slot: ith is the slot, not the thread
  uint64_t seen = 0;                 // job numbers start at 1
  for (;;) {
    uint64_t word = generation_.load(std::memory_order_acquire);
    for (int i = 0; spin_ && job_of(word) == seen && i < kSpinIterations; ++i) {
      WEFT_PAUSE();
      word = generation_.load(std::memory_order_acquire);
    }
    if (job_of(word) == seen) {
      generation_.wait(word, std::memory_order_acquire);  // claims also change the word: re-check
      continue;
    }
    seen = job_of(word);
    if (stop_.load()) return;
    run_slots(generation_, pending_, job_, n_threads_, seen);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_, std::memory_order_relaxed);
  // Every slot of the previous job was claimed and finished, so the word is (job << bits) | n.
  const uint64_t job = job_of(generation_.load(std::memory_order_relaxed)) + 1;
  generation_.store(job << kSlotBits, std::memory_order_release);
  generation_.notify_all();
  run_slots(generation_, pending_, job_, n_threads_, job);
  // Slots other threads claimed may still run; they are running (or were preempted mid-slot).
  int left = pending_.load(std::memory_order_acquire);
  for (int i = 0; left != 0 && i < kSpinIterations; ++i) {
    WEFT_PAUSE();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t align, const std::function<void(int64_t, int64_t)>& fn) {
  run([&](int ith, int nth) {
    auto [b, e] = split_range(n, align, ith, nth);
    if (b < e) fn(b, e);
  });
}

void ThreadPool::parallel_steal(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  chunk = std::max({chunk, int64_t{1}, n >> 31});  // chunk indices fit the 32 bits of a Range half
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  if (n_threads_ == 1 || n_chunks == 1) return fn(0, n);
  for (int i = 0; i < n_threads_; ++i) {
    const auto [b, e] = split_range(n_chunks, 1, i, n_threads_);
    ranges_[i].word.store(static_cast<uint64_t>(b) | static_cast<uint64_t>(e) << 32, std::memory_order_relaxed);
  }
  auto take = [](StealRange& r, bool front) -> int64_t {  // a chunk index, or -1 when none is left
    uint64_t w = r.word.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t f = w & 0xffffffffu, b = w >> 32;
      if (f >= b) return -1;
      const uint64_t next = front ? w + 1 : (b - 1) << 32 | f;
      if (r.word.compare_exchange_weak(w, next, std::memory_order_relaxed))
        return static_cast<int64_t>(front ? f : b - 1);
    }
  };
  auto chunk_range = [&](int64_t c) { fn(c * chunk, std::min(n, (c + 1) * chunk)); };
  // run() publishes the ranges to the workers (its job store is a release, their claim an acquire)
  // and returns only when every slot is done, so the next call may overwrite them.
  run([&](int ith, int nth) {
    for (int64_t c; (c = take(ranges_[ith], true)) >= 0;) chunk_range(c);
    for (int k = 1; k < nth; ++k)  // then the others', nearest first
      for (StealRange& r = ranges_[(ith + k) % nth];;) {
        const int64_t c = take(r, false);
        if (c < 0) break;
        chunk_range(c);
      }
  });
}

}  // namespace weft
