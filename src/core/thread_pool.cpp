#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define WEFT_PAUSE() _mm_pause()
#else
#define WEFT_PAUSE() std::this_thread::yield()
#endif

namespace weft {
namespace {
// ~50 us of pause loops: long enough to bridge the gap between two ops of one token,
// short enough that an idle pool sleeps quickly.
constexpr int kSpinIterations = 20000;
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
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int i = 0; spin_ && g == seen && i < kSpinIterations; ++i) {
      WEFT_PAUSE();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load()) return;
    (*job_)(ith, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, n_threads_);
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

}  // namespace weft
