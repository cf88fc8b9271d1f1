#include "parallel/gloo_group.h"

#include "parallel/gloo_all_reduce.h"
#include "parallel/host_shm.h"

#include "core/error.h"
#include "core/fp16.h"
#include "net/kv_store.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>

namespace weft::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// gloo::rendezvous::Store over the coordinator's KV store.
class KvStore : public gloo::rendezvous::Store {
 public:
  KvStore(const std::string& addr, int timeout_ms, const std::vector<uint8_t>& key)
      : kv_(net::parse_host_port(addr), timeout_ms, key), timeout_ms_(timeout_ms) {}
  void set(const std::string& key, const std::vector<char>& data) override { kv_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return kv_.get(key); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, std::chrono::milliseconds(timeout_ms_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const auto& k : keys) kv_.get(k, static_cast<int>(timeout.count()));
  }

 private:
  net::KvClient kv_;
  int timeout_ms_;
};

// Gloo has no way to interrupt a rank blocked in a collective: its waits end only at the op
// timeout, and its pair class (with the socket) is not in Debian's headers. Shutting the socket
// down does it: the blocked read sees EOF at once and Gloo fails the op. So a group remembers the
// connected sockets that appeared while it connected, and abort() shuts down those that are still
// the same connection (same local and peer address), never a descriptor reused since.
struct SocketId {
  int fd;
  sockaddr_storage local, peer;
  bool operator==(const SocketId& o) const {
    return fd == o.fd && std::memcmp(&local, &o.local, sizeof local) == 0 &&
           std::memcmp(&peer, &o.peer, sizeof peer) == 0;
  }
};

std::optional<SocketId> socket_id(int fd) {
  SocketId id{fd, {}, {}};
  socklen_t a = sizeof id.local, b = sizeof id.peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&id.local), &a) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&id.peer), &b) != 0)
    return std::nullopt;
  if (id.local.ss_family != AF_INET && id.local.ss_family != AF_INET6) return std::nullopt;
  return id;
}

bool is_loopback(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return (ntohl(reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr) >> 24) == 127;
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&in6)) return in6.s6_addr[12] == 127;
  return IN6_IS_ADDR_LOOPBACK(&in6);
}

std::vector<SocketId> connected_sockets() {
  std::vector<SocketId> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    const std::string name = e.path().filename().string();
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc{}) continue;
    if (auto id = socket_id(fd)) out.push_back(*id);
  }
  return out;
}

// Reduced-precision wire: values travel as 16-bit bf16 / f16 and each addition happens in f32,
// rounded back to the wire type (one rounding per partial sum, as a ring would do on the way). On
// the sync path every rank ends with the same bits; the equality tests bound what the rounding does
// to logits.
template <WireType W>
float from_wire(uint16_t h) {
  return W == WireType::BF16 ? bf16_to_f32(h) : fp16_to_f32(h);
}
template <WireType W>
uint16_t to_wire(float f) {
  return W == WireType::BF16 ? f32_to_bf16(f) : f32_to_fp16(f);
}
template <WireType W>
void wire_sum3(void* c, const void* a, const void* b, size_t n) {  // gloo::allreduce's c = a + b
  auto* out = static_cast<uint16_t*>(c);
  const auto *x = static_cast<const uint16_t*>(a), *y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = to_wire<W>(from_wire<W>(x[i]) + from_wire<W>(y[i]));
}
template <WireType W>
void wire_add(void* acc, const void* x, size_t n) {  // SyncAllReduce's acc += x (elementwise: c may be a)
  wire_sum3<W>(acc, acc, x, n);
}
void f32_add(void* acc, const void* x, size_t n) {
  auto* a = static_cast<float*>(acc);
  const auto* y = static_cast<const float*>(x);
  for (size_t i = 0; i < n; ++i) a[i] += y[i];
}

// Whether the group's all-reduces can run through shared memory: every rank on this host (equal
// host_identity()) and asking for it. Every rank runs the same three collectives whatever it
// finds (identities; the segment's name from rank 0; whether each rank mapped it), so all of them
// decide alike, and a rank that cannot create or open the segment leaves the group on TCP.
std::unique_ptr<HostShm> join_host_shm(const std::shared_ptr<gloo::Context>& ctx, bool wanted,
                                       std::chrono::milliseconds timeout, uint32_t& tag) {
  constexpr size_t kRecord = 128;  // a flag byte, then the identity
  const int rank = ctx->rank, size = ctx->size;
  auto gather = [&](std::vector<uint8_t> mine) {
    std::vector<uint8_t> all(mine.size() * size);
    gloo::AllgatherOptions o(ctx);
    o.setInput(mine.data(), mine.size());
    o.setOutput(all.data(), all.size());
    o.setTag(tag++);
    o.setTimeout(timeout);
    gloo::allgather(o);
    return all;
  };
  std::vector<uint8_t> record(kRecord, 0);
  const std::string id = wanted ? host_identity() : "";
  if (!id.empty() && id.size() < kRecord) {
    record[0] = 1;
    std::memcpy(record.data() + 1, id.data(), id.size());
  }
  const std::vector<uint8_t> ids = gather(record);
  if (record[0] != 1) return nullptr;
  for (int r = 0; r < size; ++r)
    if (!std::equal(record.begin(), record.end(), ids.begin() + r * kRecord)) return nullptr;

  std::unique_ptr<HostShm> shm;
  std::vector<char> name(64, 0);
  if (rank == 0) {
    try {
      shm = HostShm::create(size);
      std::copy(shm->name().begin(), shm->name().end(), name.begin());
    } catch (const Error&) {  // e.g. no /dev/shm: the group stays on TCP
    }
  }
  // The root's input is a copy: Gloo copies input to output while its loop thread still sends it.
  std::vector<char> sent = name;
  gloo::BroadcastOptions b(ctx);
  b.setOutput(name.data(), name.size());
  if (rank == 0) b.setInput(sent.data(), sent.size());
  b.setRoot(0);
  b.setTag(tag++);
  b.setTimeout(timeout);
  gloo::broadcast(b);
  name.back() = 0;
  if (rank != 0 && name[0] != 0) {
    try {
      shm = HostShm::open(name.data(), rank, size);
    } catch (const Error&) {
    }
  }
  const std::vector<uint8_t> mapped = gather({static_cast<uint8_t>(shm != nullptr)});
  if (rank == 0 && shm) shm->unlink();  // every rank has opened it, or given up
  if (std::find(mapped.begin(), mapped.end(), 0) != mapped.end()) return nullptr;
  return shm;
}

// Why two contexts: Gloo's tcp pairs in sync mode leave the device's event loop and are read only
// by the thread that waits (optionally busy-polling). Only pre-registered transport buffers wait
// that way; the gloo::allreduce(options) API and the other collectives receive into unbound
// buffers, which only the event loop fills, so on a sync pair they would never see their bytes.
// All-reduces (every step's hot path) therefore run SyncAllReduce on a second, sync-mode mesh; the
// rarer collectives stay on the asynchronous one.
class GlooGroup : public Group {
 public:
  GlooGroup(int rank, int size, WireType wire, const GlooOptions& opt) : wire_(wire), timeout_(opt.timeout_ms) {
    // Gloo writes with writev, not send(MSG_NOSIGNAL): a write to a peer that died raises SIGPIPE,
    // whose default action ends this process. It must be an error (EPIPE) the engine reports.
    static const bool sigpipe_ignored = std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
    (void)sigpipe_ignored;
    const std::vector<SocketId> before = connected_sockets();
    try {
      KvStore kv(opt.store, opt.timeout_ms, opt.store_key);
      gloo::transport::tcp::attr attr;
      attr.hostname = opt.hostname;
      auto dev = gloo::transport::tcp::CreateDevice(attr);
      auto connect = [&](const std::string& prefix) {
        gloo::rendezvous::PrefixStore store(prefix, kv);
        auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        ctx->setTimeout(timeout_);
        ctx->connectFullMesh(store, dev);
        return ctx;
      };
      ctx_ = connect(opt.prefix);
      const std::vector<SocketId> before_sync = connected_sockets();
      sync_ctx_ = connect(opt.prefix + "/sync");
      std::vector<int> spin_fds;  // the sync mesh's sockets (see SyncAllReduce)
      if (opt.busy_poll)
        for (const SocketId& id : connected_sockets())
          if (std::find(before_sync.begin(), before_sync.end(), id) == before_sync.end()) spin_fds.push_back(id.fd);
      for (int r = 0; r < size; ++r)
        if (r != rank) sync_ctx_->getPair(r)->setSync(true, /*busyPoll=*/false);  // SyncAllReduce spins itself
      if (opt.sync_chunk_bytes > 0)
        sync_ = std::make_unique<SyncAllReduce>(sync_ctx_, opt.sync_chunk_bytes, std::move(spin_fds));
      shm_ = join_host_shm(ctx_, opt.host_shm, timeout_, tag_);
      // Every rank of a host shm group computes on this host: with more ranks than this process's
      // cores, a spinning rank holds the core a late peer needs (3 one-thread workers on 2 cores,
      // 500m tg32: 110-134 t/s spinning, 155-165 sleeping at once).
      shm_spin_ = opt.busy_poll && size <= available_cores();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail("gloo", "rank {} of {}: cannot connect the group: {}", rank, size, e.what());
    }
    for (const SocketId& id : connected_sockets())
      if (std::find(before.begin(), before.end(), id) == before.end()) sockets_.push_back(id);
    network_ = std::any_of(sockets_.begin(), sockets_.end(), [](const SocketId& id) { return !is_loopback(id.peer); });
  }
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }

  void all_reduce_sum(float* data, size_t n) override {
    Timer t(this, n * wire_type_bytes(wire_));
    ++stats_.n_all_reduce;
    if (shm_) return shm_->all_reduce_sum(data, n, wire_, shm_spin_, static_cast<int>(timeout_.count()));
    run("all_reduce", [&] {
      switch (wire_) {
        case WireType::F32: return all_reduce(data, n, &f32_add, &gloo::sum<float>);
        case WireType::BF16: return all_reduce_16<WireType::BF16>(data, n);
        case WireType::F16: return all_reduce_16<WireType::F16>(data, n);
      }
    });
  }
  void all_gather(const float* mine, const std::vector<size_t>& counts, float* out) override {
    WEFT_ASSERT(static_cast<int>(counts.size()) == size());
    Timer t(this, 0);
    run("all_gather", [&] {
      gloo::AllgathervOptions o(ctx_);
      o.setInput(const_cast<float*>(mine), counts[rank()]);
      o.setOutput(out, counts);
      o.setTag(tag_++);
      o.setTimeout(timeout_);
      gloo::allgatherv(o);
    });
  }
  void broadcast(float* data, size_t n, int root) override {
    Timer t(this, 0);
    run("broadcast", [&] {
      gloo::BroadcastOptions o(ctx_);
      if (rank() == root) {  // from a copy: Gloo copies input to output while its loop thread sends it
        tmp_.assign(data, data + n);
        o.setInput(tmp_.data(), n);
      }
      o.setOutput(data, n);
      o.setRoot(root);
      o.setTag(tag_++);
      o.setTimeout(timeout_);
      gloo::broadcast(o);
    });
  }
  // Sum of everything, then each rank keeps its segment: moves more bytes than a true reduce-scatter
  // but is exact and simple; the runner's hot path uses all_reduce and all_gather only.
  void reduce_scatter_sum(const float* data, const std::vector<size_t>& counts, float* out) override {
    WEFT_ASSERT(static_cast<int>(counts.size()) == size());
    const size_t n = std::accumulate(counts.begin(), counts.end(), size_t{0});
    tmp_.assign(data, data + n);
    all_reduce_sum(tmp_.data(), n);
    const size_t off = std::accumulate(counts.begin(), counts.begin() + rank(), size_t{0});
    std::copy(tmp_.begin() + off, tmp_.begin() + off + counts[rank()], out);
  }
  void barrier() override {
    run("barrier", [&] {
      gloo::BarrierOptions o(ctx_);
      o.setTag(tag_++);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    });
  }
  const GroupStats& stats() const override { return stats_; }
  // Peers beyond loopback. On loopback the bytes are copied by the cores that compute, so overlap
  // only adds contention (measured: pp128 over two one-thread workers on 2 cores, x0.83). Every
  // rank decides alike: a group spanning hosts publishes routable addresses to all its ranks.
  bool waits_on_network() const override { return network_; }
  std::string_view transport() const override { return shm_ ? "host shared memory" : "tcp"; }
  // Called from another thread while this rank may be blocked in a collective (see shutdown_pairs).
  // The group is unusable afterwards.
  void abort() override {
    if (shm_) shm_->abort();
    for (const SocketId& id : sockets_)
      if (socket_id(id.fd) == id) ::shutdown(id.fd, SHUT_RDWR);
  }

 private:
  struct Timer {
    Timer(GlooGroup* group, size_t bytes) : g(group), t0(Clock::now()) { g->stats_.bytes_all_reduce += bytes; }
    ~Timer() { g->stats_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count(); }
    GlooGroup* g;
    Clock::time_point t0;
  };
  // Gloo reports a dead peer or a timeout as gloo::IoException / EnforceNotMet.
  template <typename F>
  void run(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      fail_by_peer("gloo", "rank {}: {} failed (a peer died or timed out): {}", rank(), what, e.what());
    }
  }

  // On the sync mesh unless the options turned it off (then Gloo's own, asynchronous algorithm).
  template <class T>
  void all_reduce(T* data, size_t n, AddFn add, void (*fn3)(void*, const void*, const void*, size_t)) {
    if (sync_) return sync_->run(data, n, sizeof(T), add);
    gloo::AllreduceOptions o(ctx_);
    o.setInput(data, n);
    o.setOutput(data, n);
    o.setTag(tag_++);
    o.setTimeout(timeout_);
    o.setReduceFunction(fn3);
    gloo::allreduce(o);
  }
  template <WireType W>
  void all_reduce_16(float* data, size_t n) {
    wire_buf_.resize(n);
    for (size_t i = 0; i < n; ++i) wire_buf_[i] = to_wire<W>(data[i]);
    all_reduce(wire_buf_.data(), n, &wire_add<W>, &wire_sum3<W>);
    for (size_t i = 0; i < n; ++i) data[i] = from_wire<W>(wire_buf_[i]);
  }

  const WireType wire_;
  std::shared_ptr<gloo::Context> ctx_;
  std::shared_ptr<gloo::Context> sync_ctx_;
  std::unique_ptr<SyncAllReduce> sync_;  // destroyed before the contexts (declared after them)
  std::vector<uint16_t> wire_buf_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
  std::unique_ptr<HostShm> shm_;  // set: all-reduces run through it (every rank on this host)
  bool shm_spin_ = false;
  std::vector<float> tmp_;
  GroupStats stats_;
  std::vector<SocketId> sockets_;  // this group's connections (see abort)
  bool network_ = false;
};

}  // namespace

bool gloo_available() { return true; }

std::unique_ptr<Group> make_gloo_group(int rank, int size, WireType wire, const GlooOptions& opt) {
  if (rank < 0 || rank >= size) fail("gloo", "rank {} outside a group of {}", rank, size);
  return std::make_unique<GlooGroup>(rank, size, wire, opt);
}

}  // namespace weft::parallel
