// Collectives between the devices of one tensor-parallel group, behind one interface.
// Backends live beside this file: shared memory for devices inside one process (shm_group),
// Gloo for processes and hosts. Every call is collective: all ranks make it, in the same order.
#pragma once

#include "parallel/wire_type.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace weft::parallel {

struct GroupStats {
  uint64_t n_all_reduce = 0;
  uint64_t bytes_all_reduce = 0;
  double wait_s = 0;  // time spent inside collectives (includes waiting for slower peers)
};

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: every rank ends with the elementwise sum over ranks.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  // In place: every rank ends with the sum over ranks as integers, wrapping (two's complement), so
  // the result depends on no order of ranks, chunks or transport: the fixed-point partial sums of
  // --exact (kernels/fixed_point.h). Gathers every rank's values (all_gather of their bits) and
  // adds them on each rank: for two ranks the bytes a ring all-reduce moves. A backend may sum
  // in place instead (shm_group).
  virtual void all_reduce_sum_exact(int64_t* data, size_t n);
  // Rank r contributes counts[r] floats from `mine`; every rank's `out` receives all
  // contributions concatenated in rank order. counts has size() entries, identical on all ranks.
  virtual void all_gather(const float* mine, const std::vector<size_t>& counts, float* out) = 0;
  // data (n floats) of rank `root` is copied to every rank.
  virtual void broadcast(float* data, size_t n, int root) = 0;
  // data holds n = sum(counts) floats on every rank; rank r ends with the sum over ranks of its
  // segment [offset_r, offset_r + counts[r]) written to out (counts[r] floats).
  virtual void reduce_scatter_sum(const float* data, const std::vector<size_t>& counts, float* out) = 0;
  virtual void barrier() = 0;
  // Called by a rank that fails mid-step: peers waiting in (or later entering) a collective of
  // this group get an error instead of waiting forever. Backends with timeouts may ignore it.
  virtual void abort() {}
  // Whether collectives wait on a network (worth overlapping with computation) rather than on
  // memory or loopback copies made by the same cores. Equal on every rank of a group.
  virtual bool waits_on_network() const { return false; }
  // What all-reduces travel over, for logs and tests: "shared memory" (one process), "host shared
  // memory" (processes of one host), "tcp".
  virtual std::string_view transport() const = 0;

  virtual const GroupStats& stats() const = 0;
};

// n handles of one in-process group (rank i is element i), for devices that share an address
// space. Waits spin briefly and then sleep (futex), so oversubscribed cores are not burned.
std::vector<std::unique_ptr<Group>> make_shm_group(int n, WireType wire = WireType::F32, bool spin = true);

}  // namespace weft::parallel
