// Collectives between processes (and hosts) on Gloo's TCP transport. Every rank of a group that
// spans processes uses one — the coordinator's in-process CPU devices included — connected through
// a rendezvous store (net::KvServer) that the coordinator runs for the duration of the connect.
#pragma once

#include "parallel/group.h"

#include <chrono>
#include <memory>
#include <string>

namespace weft::parallel {

// How a rank waits for its peers' bytes in an all-reduce (the per-token latency path): Busy polls
// the socket for a bounded time (50 us) before it sleeps in recv() (a busy-poll's latency when
// the peer is about to send; the core back when it is not), Block sleeps at once. Auto picks Busy
// when the process's compute threads fit on the cores it may run on. Each rank chooses for
// itself; the wire protocol is the same either way.
enum class NetPoll { Auto, Busy, Block };
NetPoll parse_net_poll(const std::string& text);  // "auto" | "busy" | "block"; throws weft::Error("cli")
// Whether a rank of a process running `process_threads` compute threads busy-polls.
bool resolve_busy_poll(NetPoll poll, int process_threads);
// Cores this process may run on (its affinity mask), not the machine's.
int available_cores();

// All-reduces run over pairs in sync mode, read by the calling thread itself (SyncAllReduce in
// gloo_all_reduce.h), in messages of at most this many bytes: a sync-mode send blocks until the
// bytes are in the socket buffers, and every rank sends before it reads, so a message must fit the
// buffers (64 KiB: below Linux's default TCP receive buffer, 128 KiB).
inline constexpr size_t kSyncChunkBytes = 64 * 1024;

struct GlooOptions {
  std::string store;       // HOST:PORT of the coordinator's rendezvous store
  std::string prefix;      // keys of this group (one store may serve several groups)
  std::string hostname;    // address the other ranks reach this rank at
  int timeout_ms = 30000;  // connect and each collective: a dead or stuck peer becomes an error
  bool busy_poll = false;  // see NetPoll
  // Largest message of an all-reduce on the sync pairs; equal on every rank. 0: all-reduces run
  // Gloo's own asynchronous algorithm instead (slower: kept for the benchmark's comparison).
  size_t sync_chunk_bytes = kSyncChunkBytes;
  // Tags and checks the store's entries (net::rendezvous_key; empty: untagged, no key in use).
  // Only the rendezvous is authenticated: Gloo's own traffic is plain TCP (see net/kv_store.h).
  std::vector<uint8_t> store_key;
  // All-reduces through a shared-memory segment (host_shm.h) when every rank of the group is on
  // this host and asks for it; loopback TCP otherwise. Ranks may differ: any rank saying no, or
  // on another host, keeps the whole group on TCP.
  bool host_shm = true;
};

// Whether this build has the Gloo backend (see no_gloo.cpp).
bool gloo_available();

// Connects rank `rank` of `size` (blocks until every rank has joined, or the timeout). All-reduces
// move `wire` values (bf16 / f16: half the bytes; each partial sum rounded on the way); the other
// collectives move f32. Every rank must pass the same wire.
std::unique_ptr<Group> make_gloo_group(int rank, int size, WireType wire, const GlooOptions& opt);

}  // namespace weft::parallel
