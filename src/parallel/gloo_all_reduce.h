// The all-reduce weft runs on Gloo's TCP pairs in sync mode: the calling thread writes and reads
// the sockets itself, so a message costs one system call on each side and no hand-off to Gloo's
// event-loop thread (Gloo's own gloo::allreduce needs that loop, and paid about 0.8 ms per call for
// 16 KiB here, against 27 us on this path: BM_gloo_all_reduce_*).
//
// Built from Gloo's transport buffers (pre-registered memory, one slot per ordered pair of ranks):
// - small payloads (up to one message): every rank sends its data to every peer and sums the
//   contributions in rank order: one message latency, and every rank gets the same bits;
// - larger ones: ring reduce-scatter then all-gather, each segment in messages of at most
//   `chunk_bytes`; each segment is reduced by one rank and copied to the others (same bits again).
// Why messages are bounded: a sync-mode send blocks until the bytes are in the socket buffers, and
// ranks send before they read; a message that fits the buffers always completes, whatever the peer
// is doing. No flow control is needed beyond that: a sync pair's bytes reach a buffer only when its
// owner reads them, in the order they were sent.
// Waiting: with spin sockets, a rank polls them for a bounded time (ShmBarrier::kSpinTime) until
// one is readable, before it sleeps in the read, so a quiet machine gets a busy-poll's latency and a loaded one
// does not lose the cores its peers need (Gloo's own busy-poll spins until the bytes come: with
// one more runnable process than cores, decode fell from ~200 to 24-46 tokens/s here).
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class Buffer;
}
}  // namespace gloo

namespace weft::parallel {

// acc[i] = acc[i] + x[i] for n elements of the wire type.
using AddFn = void (*)(void* acc, const void* x, size_t n);

class SyncAllReduce {
 public:
  // ctx: connected, every pair already in sync mode (blocking reads). Every rank passes the same
  // chunk_bytes. spin_fds: the context's sockets (Gloo does not say which pair owns which, so
  // any of them readable ends the spin); empty: no spinning, each rank's own choice.
  SyncAllReduce(std::shared_ptr<gloo::Context> ctx, size_t chunk_bytes, std::vector<int> spin_fds);
  ~SyncAllReduce();
  SyncAllReduce(const SyncAllReduce&) = delete;
  SyncAllReduce& operator=(const SyncAllReduce&) = delete;

  // In place over n elements of elem_bytes each; on return every rank holds the same sum.
  void run(void* data, size_t n, size_t elem_bytes, AddFn add);

 private:
  struct Segment {
    size_t offset, count;  // elements
  };
  void one_shot(uint8_t* data, size_t n, size_t elem_bytes, AddFn add);
  // Sends `send` to the right neighbour while receiving `recv` from the left one, message by
  // message; received elements are added into data (add) or copied over it (add == nullptr).
  void ring_step(uint8_t* data, Segment send, Segment recv, size_t elem_bytes, AddFn add);
  Segment segment(size_t n, int index) const;
  void receive(int peer);  // the peer's next message into in_[peer]

  std::shared_ptr<gloo::Context> ctx_;
  int rank_, size_;
  size_t chunk_bytes_;
  std::vector<pollfd> spin_fds_;                                     // built once: polled before every receive
  std::vector<uint8_t> out_;                                         // what this rank sends (one message)
  std::vector<std::vector<uint8_t>> in_;                             // per peer: its last message
  std::vector<std::unique_ptr<gloo::transport::Buffer>> to_, from_;  // per peer (null at rank_)
};

}  // namespace weft::parallel
