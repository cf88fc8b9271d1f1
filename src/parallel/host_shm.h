// All-reduces between the processes of one host through a POSIX shared-memory segment. Ranks of a
// network group that find themselves on one host (gloo_group.cpp decides, with every rank) take it
// instead of loopback TCP, as NCCL's SHM transport does inside a node: an all-reduce costs one
// barrier and two copies, where loopback TCP costs socket round trips through the kernel.
#pragma once

#include "parallel/shm_barrier.h"
#include "parallel/wire_type.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace weft::parallel {

// What two processes must share for one to open the other's segment and watch its pid: the boot,
// the user, the mount namespace (which /dev/shm) and the pid namespace. The network namespace too:
// processes in different ones talk as hosts do (scripts/netbed.sh emulates hosts that way), and
// are treated as hosts. Empty when unknown.
std::string host_identity();

// Floats each rank stages per round; larger all-reduces run in rounds of this many. 256 KiB: a
// round's buffers stay in the cores' caches (BM_host_shm_all_reduce_spin/262144: 177 us in rounds
// of 2^16 floats, 260-290 us in rounds of 2^18, 215 us in rounds of 2^14).
inline constexpr size_t kHostShmChunkFloats = size_t{1} << 16;

class HostShm {
 public:
  // Rank 0 creates the segment (owner-only, a random name); the others open it by that name.
  static std::unique_ptr<HostShm> create(int size, size_t chunk_floats = kHostShmChunkFloats);
  static std::unique_ptr<HostShm> open(const std::string& name, int rank, int size);
  ~HostShm();
  HostShm(const HostShm&) = delete;
  HostShm& operator=(const HostShm&) = delete;

  const std::string& name() const { return name_; }
  // Removes the name once every rank has the segment mapped: nothing is left behind in /dev/shm.
  void unlink();

  // In place: every rank ends with the sum over ranks, bit-identical on all of them. While it
  // sleeps, a rank gives up with an error at `timeout_ms`, as soon as a peer process has exited,
  // or when a peer aborts. `spin`: spin briefly before sleeping (see ShmBarrier).
  void all_reduce_sum(float* data, size_t n, WireType wire, bool spin, int timeout_ms);
  // Wakes every rank waiting in (or later entering) an all-reduce with an error.
  void abort();

  // The segment's layout (host_shm.cpp): a header, a line per rank, two sets of buffers.
  struct Header;
  struct RankLine;

 private:
  HostShm(std::string name, int rank, int size, size_t chunk, void* base, size_t bytes);
  RankLine& line(int rank) const;
  float* buffer(int parity, int rank) const;
  void check_peers_alive() const;

  std::string name_;
  int rank_, size_;
  size_t chunk_;
  void* base_;
  size_t bytes_;
  Header* header_;
  int parity_ = 0;  // which of the two sets of buffers this round uses (see all_reduce_sum)
  std::vector<const float*> srcs_;
};

}  // namespace weft::parallel
