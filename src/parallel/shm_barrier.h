// Sense-reversing barrier for the ranks of a shared-memory group: the threads of one process
// (shm_group) or the processes of one host, with the barrier in a shared mapping (host_shm).
// Arrivals count up; the last one resets the count and flips the phase, which releases the rest.
// Waiters spin with pause for a bounded time, then sleep on the phase word (a futex without the
// private flag, so it wakes sleepers in other processes too), so a group with more ranks than
// free cores does not burn the cores of the peers it is waiting for.
#pragma once

#include "core/error.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#define WEFT_SHM_PAUSE() _mm_pause()
#else
#define WEFT_SHM_PAUSE() std::this_thread::yield()
#endif

namespace weft::parallel {

// The barrier's words are futexes shared between processes: plain 32-bit atomics, nothing else.
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);

class ShmBarrier {
 public:
  // Spin budget, bounded by time rather than a pause count because pause latency varies ~30x
  // between cores (3 ns on older parts, ~40 ns measured on this Xeon). 50 us covers the usual
  // skew between ranks finishing their matmul slices; a peer that is later than that (or not
  // scheduled at all) costs one futex wake, not a burned core.
  static constexpr std::chrono::microseconds kSpinTime{50};
  static constexpr int kPausesPerClockRead = 32;  // a clock read costs about one pause
  // A sleeping waiter wakes this often to run its idle check (a deadline, a peer's liveness).
  static constexpr std::chrono::milliseconds kIdleCheck{10};

  explicit ShmBarrier(int n) : n_(static_cast<uint32_t>(n)) {}

  // Wakes every waiter, now and later, with an error: a rank that failed mid-step will never
  // arrive, and its peers must not wait for it forever.
  void abort() {
    aborted_.store(1, std::memory_order_seq_cst);
    phase_.fetch_add(1, std::memory_order_seq_cst);
    wake_all();
  }

  // `spin`: spin before sleeping (a rank whose process leaves a core free for it). on_idle() runs
  // about every kIdleCheck while this rank sleeps; it throws to stop waiting (the barrier is
  // unusable afterwards, as after abort()).
  template <class OnIdle>
  void arrive_and_wait(bool spin, OnIdle&& on_idle) {
    check_aborted();
    wait_phase(spin, on_idle);
    check_aborted();
  }
  void arrive_and_wait(bool spin) {
    arrive_and_wait(spin, [] {});
  }

 private:
  void check_aborted() const {
    if (aborted_.load(std::memory_order_acquire)) fail_by_peer("shm", "a peer device failed during a collective");
  }

  void wake_all() { ::syscall(SYS_futex, word(phase_), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }
  static uint32_t* word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

  template <class OnIdle>
  void wait_phase(bool spin, OnIdle& on_idle) {
    // Read the phase before arriving: it cannot flip until this rank has arrived, so a waiter
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
      if (sleepers_.load(std::memory_order_seq_cst) != 0) wake_all();
      return;
    }
    if (spin) {
      const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      for (int i = 1;; ++i) {
        if (phase_.load(std::memory_order_acquire) != phase) return;
        WEFT_SHM_PAUSE();
        if (i % kPausesPerClockRead == 0 && std::chrono::steady_clock::now() >= deadline) break;
      }
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    struct Leave {  // also when on_idle throws
      std::atomic<uint32_t>& s;
      ~Leave() { s.fetch_sub(1, std::memory_order_relaxed); }
    } leave{sleepers_};
    constexpr timespec slice{0, std::chrono::nanoseconds(kIdleCheck).count()};
    while (phase_.load(std::memory_order_seq_cst) == phase) {
      ::syscall(SYS_futex, word(phase_), FUTEX_WAIT, phase, &slice, nullptr, 0);
      if (phase_.load(std::memory_order_acquire) == phase) on_idle();
    }
  }

  const uint32_t n_;
  // Separate cache lines: arrivals hammer arrived_, waiters poll phase_.
  alignas(64) std::atomic<uint32_t> arrived_{0};
  alignas(64) std::atomic<uint32_t> phase_{0};
  alignas(64) std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint32_t> aborted_{0};
};

}  // namespace weft::parallel
