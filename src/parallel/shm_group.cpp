// Shared-memory collectives for devices inside one process: every rank is a thread with its own
// handle onto one ShmState. A collective is "publish pointers; barrier; each rank does its share
// of the copying/summing, reading peers' buffers directly; barrier". The second barrier keeps
// every buffer alive and unchanged until all peers are done with it. Between the barriers each
// destination element is written by exactly one rank, so there is no data race.
#include "core/error.h"
#include "core/thread_pool.h"
#include "parallel/group.h"
#include "parallel/shm_barrier.h"
#include "parallel/wire_sum.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace weft::parallel {
namespace {

// 16 floats = one 64-byte cache line: all_reduce chunk boundaries fall on line boundaries (of
// buffers that are themselves line aligned), so two ranks never write the same line.
constexpr int64_t kLineFloats = 16;

// What one rank tells its peers for the current collective.
struct alignas(64) Slot {
  const float* src = nullptr;
  float* dst = nullptr;
  size_t n = 0;
  int root = 0;
};

struct ShmState {
  ShmState(int n_ranks, WireType w, bool spin_wait)
      : n(n_ranks), wire(w), spin(spin_wait), barrier(n_ranks), slots(n_ranks) {}
  const int n;
  const WireType wire;
  const bool spin;
  ShmBarrier barrier;
  std::vector<Slot> slots;
};

class ShmGroup final : public Group {
 public:
  ShmGroup(std::shared_ptr<ShmState> s, int rank) : s_(std::move(s)), rank_(rank), bufs_(s_->n), srcs_(s_->n) {}

  int rank() const override { return rank_; }
  int size() const override { return s_->n; }
  const GroupStats& stats() const override { return stats_; }
  void abort() override { s_->barrier.abort(); }
  std::string_view transport() const override { return "shared memory"; }

  void all_reduce_sum(float* data, size_t n) override {
    reduce(data, n, n * wire_type_bytes(s_->wire), kLineFloats, [&](int64_t b, int64_t e) {
      const int nr = s_->n;
      for (int k = 0; k < nr; ++k) bufs_[k] = s_->slots[k].dst + b;
      sum_into(s_->wire, bufs_.data(), nr, bufs_.data(), nr, static_cast<size_t>(e - b));
    });
  }

  // The integers summed in place, as the floats are (the ranks' buffers hold int64 here).
  void all_reduce_sum_exact(int64_t* data, size_t n) override {
    reduce(reinterpret_cast<float*>(data), n, n * sizeof(int64_t), kLineFloats / 2, [&](int64_t b, int64_t e) {
      const int nr = s_->n;
      for (int64_t i = b; i < e; ++i) {
        uint64_t sum = 0;
        for (int k = 0; k < nr; ++k)
          sum += static_cast<uint64_t>(reinterpret_cast<const int64_t*>(s_->slots[k].dst)[i]);
        for (int k = 0; k < nr; ++k) reinterpret_cast<int64_t*>(s_->slots[k].dst)[i] = static_cast<int64_t>(sum);
      }
    });
  }

  void all_gather(const float* mine, const std::vector<size_t>& counts, float* out) override {
    Timer t(stats_);
    check_counts(counts, "all_gather");
    size_t total = 0;
    for (size_t c : counts) total += c;
    publish(mine, out, total, 0);
    const bool ok = same_n_everywhere();
    if (ok) {
      // Each rank fills its own `out` (writes stay local to the reader's memory).
      size_t off = 0;
      for (int k = 0; k < s_->n; ++k) {
        const float* src = s_->slots[k].src;
        if (counts[k] != 0 && src != out + off) std::memmove(out + off, src, counts[k] * sizeof(float));
        off += counts[k];
      }
    }
    s_->barrier.arrive_and_wait(s_->spin);
    if (!ok) mismatch("all_gather");
  }

  void broadcast(float* data, size_t n, int root) override {
    Timer t(stats_);
    if (root < 0 || root >= s_->n) fail("shm", "broadcast root {} outside group of {}", root, s_->n);
    publish(data, data, n, root);
    bool ok = same_n_everywhere();
    for (int k = 0; k < s_->n; ++k) ok = ok && s_->slots[k].root == root;
    if (ok && rank_ != root && n != 0) std::memcpy(data, s_->slots[root].src, n * sizeof(float));
    s_->barrier.arrive_and_wait(s_->spin);
    if (!ok) mismatch("broadcast");
  }

  void reduce_scatter_sum(const float* data, const std::vector<size_t>& counts, float* out) override {
    Timer t(stats_);
    check_counts(counts, "reduce_scatter_sum");
    size_t total = 0, offset = 0;
    for (int k = 0; k < s_->n; ++k) {
      if (k < rank_) offset += counts[k];
      total += counts[k];
    }
    publish(data, out, total, 0);
    const bool ok = same_n_everywhere();
    if (ok && counts[rank_] != 0) {
      const int nr = s_->n;
      for (int k = 0; k < nr; ++k) srcs_[k] = s_->slots[k].src + offset;
      sum_into(s_->wire, srcs_.data(), nr, &out, 1, counts[rank_]);
    }
    s_->barrier.arrive_and_wait(s_->spin);
    if (!ok) mismatch("reduce_scatter_sum");
  }

  void barrier() override {
    Timer t(stats_);
    s_->barrier.arrive_and_wait(s_->spin);
  }

 private:
  // An all-reduce of n values of `data`: rank r owns chunk r (on `align`-value line boundaries)
  // and sum(b, e) reads values [b, e) of every rank and writes their sum back to all.
  template <class Sum>
  void reduce(float* data, size_t n, size_t bytes, int64_t align, Sum sum) {
    Timer t(stats_);
    ++stats_.n_all_reduce;
    stats_.bytes_all_reduce += bytes;
    publish(data, data, n, 0);
    const bool ok = same_n_everywhere();
    if (ok) {
      auto [b, e] = split_range(static_cast<int64_t>(n), align, rank_, s_->n);
      if (b < e) sum(b, e);
    }
    s_->barrier.arrive_and_wait(s_->spin);
    if (!ok) mismatch("all_reduce_sum");
  }

  // Adds the time spent inside one collective to wait_s.
  struct Timer {
    explicit Timer(GroupStats& st) : s(st), t0(std::chrono::steady_clock::now()) {}
    ~Timer() { s.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    GroupStats& s;
    std::chrono::steady_clock::time_point t0;
  };

  // Writes this rank's slot, then waits for every peer's: the barrier orders the slot writes
  // before any peer's reads.
  void publish(const float* src, float* dst, size_t n, int root) {
    Slot& me = s_->slots[rank_];
    me.src = src;
    me.dst = dst;
    me.n = n;
    me.root = root;
    s_->barrier.arrive_and_wait(s_->spin);
  }

  // Ranks disagreeing on a size is a caller bug; every rank sees the same slots, so all of them
  // skip the copy, finish the collective (nobody is left waiting) and then throw together.
  bool same_n_everywhere() const {
    for (int k = 0; k < s_->n; ++k)
      if (s_->slots[k].n != s_->slots[rank_].n) return false;
    return true;
  }

  void check_counts(const std::vector<size_t>& counts, const char* op) const {
    if (counts.size() != static_cast<size_t>(s_->n))
      fail("shm", "{}: {} counts for a group of {}", op, counts.size(), s_->n);
  }

  [[noreturn]] void mismatch(const char* op) const {
    fail("shm", "{}: ranks called it with different sizes or roots (rank {})", op, rank_);
  }

  std::shared_ptr<ShmState> s_;
  const int rank_;
  GroupStats stats_;
  // Per-call pointer lists, allocated once so collectives do not allocate.
  std::vector<float*> bufs_;
  std::vector<const float*> srcs_;
};

}  // namespace

std::vector<std::unique_ptr<Group>> make_shm_group(int n, WireType wire, bool spin) {
  if (n < 1) fail("shm", "group size {} must be at least 1", n);
  auto state = std::make_shared<ShmState>(n, wire, spin);
  std::vector<std::unique_ptr<Group>> out;
  out.reserve(n);
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<ShmGroup>(state, r));
  return out;
}

}  // namespace weft::parallel
