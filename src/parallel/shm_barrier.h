// Sense-reversing barrier for the threads of one in-process group (internal to shm_group).
// Arrivals count up; the last one resets the count and flips the phase, which releases the rest.
// Waiters spin with pause for a bounded time, then sleep on the phase word (futex), so a group
// with more threads than free cores does not burn the cores of the peers it is waiting for.
#pragma once

#include "core/error.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#define WEFT_SHM_PAUSE() _mm_pause()
#else
#define WEFT_SHM_PAUSE() std::this_thread::yield()
#endif

namespace weft::parallel {

class ShmBarrier {
 public:
  // Spin budget, bounded by time rather than a pause count because pause latency varies ~30x
  // between cores (3 ns on older parts, ~40 ns measured on this Xeon). 50 us covers the usual
  // skew between ranks finishing their matmul slices; a peer that is later than that (or not
  // scheduled at all) costs one futex wake, not a burned core.
  static constexpr std::chrono::microseconds kSpinTime{50};
  static constexpr int kPausesPerClockRead = 32;  // a clock read costs about one pause

  ShmBarrier(int n, bool spin) : n_(n), spin_(spin) {}

  // Wakes every waiter, now and later, with an error: a rank that failed mid-step will never
  // arrive, and its peers must not wait for it forever.
  void abort() {
    aborted_.store(true, std::memory_order_seq_cst);
    phase_.fetch_add(1, std::memory_order_seq_cst);
    phase_.notify_all();
  }

  void arrive_and_wait() {
    check_aborted();
    wait_phase();
    check_aborted();
  }

 private:
  void check_aborted() const {
    if (aborted_.load(std::memory_order_acquire)) fail_by_peer("shm", "a peer device failed during a collective");
  }

  void wait_phase() {
    // Read the phase before arriving: it cannot flip until this thread has arrived, so a waiter
    // never misses the release it is waiting for.
    const uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      // Nobody can arrive at the next round before seeing the new phase, which this store
      // happens-before (release/seq_cst below), so resetting the count here is safe.
      arrived_.store(0, std::memory_order_relaxed);
      phase_.fetch_add(1, std::memory_order_seq_cst);
      // Dekker pair with the sleeper (sleepers_++ then phase_ load, both seq_cst): either the
      // sleeper sees the new phase, or we see it counted and wake it. Skips a syscall per round
      // when every peer is still spinning.
      if (sleepers_.load(std::memory_order_seq_cst) != 0) phase_.notify_all();
      return;
    }
    if (spin_) {
      const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      for (int i = 1;; ++i) {
        if (phase_.load(std::memory_order_acquire) != phase) return;
        WEFT_SHM_PAUSE();
        if (i % kPausesPerClockRead == 0 && std::chrono::steady_clock::now() >= deadline) break;
      }
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (phase_.load(std::memory_order_seq_cst) == phase) phase_.wait(phase, std::memory_order_acquire);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  const int n_;
  const bool spin_;
  // Separate cache lines: arrivals hammer arrived_, waiters poll phase_.
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<uint32_t> phase_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> aborted_{false};
};

}  // namespace weft::parallel
