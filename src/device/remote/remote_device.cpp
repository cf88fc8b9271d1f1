#include "device/remote/remote_device.h"

#include "device/cpu/cpu_device.h"
#include "device/remote/model_store.h"

#include "core/error.h"
#include "core/progress.h"
#include "kernels/quants.h"
#include "net/handshake.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

namespace weft::device::remote {
namespace {

using net::MsgType;

constexpr size_t kChunkBytes = 8u << 20;  // weight bytes per TensorChunk frame (limit is 16 MiB)
// A send must progress within this; a worker that stops reading (host down) fails the send.
constexpr int kSendTimeoutMs = 15000;
constexpr int kPollMs = 100;           // how often a wait looks at the group's other workers
constexpr int kBodyTimeoutMs = 60000;  // once a frame has started, the rest must follow

CoordinatorConfig& config() {
  static CoordinatorConfig c;
  return c;
}

// Gathers a stream of pieces into frames of kChunkBytes. Pieces of the model mapping are sent from
// there (no copy); small ones, and ones that do not outlive the call (an empty slice's zeros), are
// staged so that a frame is never a long list of tiny parts.
class ChunkSender {
 public:
  using Send = std::function<void(std::span<const std::span<const uint8_t>> parts, size_t n_bytes)>;
  explicit ChunkSender(Send send) : send_(std::move(send)), staging_(new uint8_t[kChunkBytes]) {}
  void add(const uint8_t* p, size_t n, bool stable) {
    while (n > 0) {
      const size_t take = std::min(n, kChunkBytes - bytes_);
      if (stable && take >= kStageBelow) {
        parts_.emplace_back(p, take);
      } else {
        uint8_t* dst = staging_.get() + staged_;
        std::memcpy(dst, p, take);
        staged_ += take;
        if (!parts_.empty() && parts_.back().data() + parts_.back().size() == dst)  // extends the staged run
          parts_.back() = {parts_.back().data(), parts_.back().size() + take};
        else
          parts_.emplace_back(dst, take);
      }
      bytes_ += take;
      p += take;
      n -= take;
      if (bytes_ == kChunkBytes || parts_.size() == kMaxParts) flush();
    }
  }
  void flush() {
    if (bytes_ > 0) send_(parts_, bytes_);
    parts_.clear();
    bytes_ = staged_ = 0;
  }

 private:
  static constexpr size_t kStageBelow = 64u << 10, kMaxParts = 64;
  Send send_;
  std::unique_ptr<uint8_t[]> staging_;  // never reallocated: staged parts point into it
  std::vector<std::span<const uint8_t>> parts_;
  size_t bytes_ = 0, staged_ = 0;
};

// Streaming progress on a terminal, summed over the devices that stream at once.
class StreamProgress {
 public:
  StreamProgress(std::string name, uint64_t total) : name_(std::move(name)), t0_(Clock::now()) {
    std::lock_guard lock(mu());
    state().total += total;
  }
  void add(uint64_t n) {
    sent_ += n;
    if (!coordinator_config().progress || !progress_visible()) return;
    std::lock_guard lock(mu());
    State& s = state();
    s.sent += n;
    if (Clock::now() - s.last_shown < std::chrono::milliseconds(200)) return;
    s.last_shown = Clock::now();
    std::fprintf(stderr, "\r\033[Kstreaming weights %3.0f%% (%.0f / %.0f MiB)",
                 100.0 * s.sent / std::max<uint64_t>(s.total, 1), s.sent / kMiB, s.total / kMiB);
  }
  ~StreamProgress() {
    std::lock_guard lock(mu());
    State& s = state();
    s.total -= std::min(s.total, sent_);  // what was not sent leaves the total too
    s.sent -= std::min(s.sent, sent_);
    if (!coordinator_config().progress) return;
    const double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
    std::fprintf(stderr, "%s%s: streamed %.1f MiB of weights in %.1f s (%.0f MiB/s)\n", ::isatty(2) ? "\r\033[K" : "",
                 name_.c_str(), sent_ / kMiB, secs, sent_ / kMiB / std::max(secs, 1e-9));
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr double kMiB = 1 << 20;
  struct State {
    uint64_t total = 0, sent = 0;
    Clock::time_point last_shown;
  };
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static State& state() {
    static State s;
    return s;
  }
  std::string name_;
  Clock::time_point t0_;
  uint64_t sent_ = 0;
};

}  // namespace

void set_coordinator_config(const CoordinatorConfig& c) { config() = c; }
const CoordinatorConfig& coordinator_config() { return config(); }

std::vector<uint8_t> coordinator_key() {
  if (!config().key_file.empty()) return net::read_key_file(config().key_file);
  const char* path = std::getenv("WEFT_AUTH_KEY_FILE");
  return path && *path ? net::read_key_file(path) : std::vector<uint8_t>{};
}

RemoteDevice::RemoteDevice(const std::string& address, int threads, const std::vector<uint8_t>& key)
    : address_(address), threads_(threads), key_(key) {
  guarded("connect", [&] {
    net::Connected c = net::connect_worker(net::parse_host_port(address), key, kConnectTimeoutMs);
    ch_ = net::Channel(std::move(c.socket), std::move(c.mac));
    last_heard_ = Clock::now();  // the worker heartbeats while it creates its device
    const net::Frame f = await(MsgType::DeviceInfo);
    net::ByteReader r(f.payload);
    served_ = read_served_device(r);
    threads_ = served_->threads;
  });
}

RemoteDevice::~RemoteDevice() {
  if (watch_) std::erase(watch_->members, this);  // the group's others may outlive this device
  if (!ch_.valid()) return;
  try {
    ch_.send(MsgType::Bye, {}, 1000);
  } catch (const Error&) {  // the worker is gone already; nothing to end
  }
}

template <typename F>
auto RemoteDevice::guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    ch_.close();
    // An error naming another device (a peer found dead while this one waited) is passed on as it
    // is; others happened here, in `what`.
    const bool here = e.device().empty() || e.device() == name();
    const Error named = here ? Error(e.origin(), fmt::format("{}: {}", what, e.message()), name(), e.blame()) : e;
    if (watch_) watch_->set_failed(named);
    throw named;
  }
}

void RemoteDevice::send(MsgType t, std::span<const uint8_t> payload) {
  ch_.send(t, payload, kSendTimeoutMs);
  last_heard_ = Clock::now();  // the silence bound counts from the request
}

net::Frame RemoteDevice::await(MsgType want) {
  for (;;) {
    check_peers();
    if (ch_.socket().readable(kPollMs)) {
      net::Frame f = ch_.recv(kBodyTimeoutMs, kBodyTimeoutMs);
      last_heard_ = Clock::now();
      if (f.type == MsgType::Heartbeat) continue;
      net::check_frame(f, want, name());
      return f;
    }
    check_silence();
  }
}

void GroupWatch::set_failed(const Error& e) {
  std::lock_guard lock(mu_);
  if (!failed_) failed_ = e;
}

std::optional<Error> GroupWatch::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

void RemoteDevice::check_peers() {
  if (!watch_) return;
  if (const auto f = watch_->failed())
    throw Error(f->origin(), fmt::format("{} (this group cannot go on)", f->what()), name(), Blame::Peer);
  // Only members in a step are probed: during a load each member's own thread reads its socket.
  for (RemoteDevice* p : watch_->members)
    if (p != this && p->in_step_ && p->ch_.valid()) p->guarded("step", [&] { p->probe(); });
}

void RemoteDevice::check_silence() const {
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
  if (silent > kPeerSilenceMs)
    fail("net", "no reply or heartbeat for {} ms: the worker or its host is down or hung", silent);
}

bool RemoteDevice::probe() {
  std::array<uint8_t, net::kFrameHeaderBytes> h;
  while (ch_.socket().peek(h.data(), h.size()) == h.size()) {
    MsgType t;
    const uint32_t len = net::parse_frame_header(h, t);
    last_heard_ = Clock::now();
    if (t != MsgType::Heartbeat || len != 0) return true;  // its reply: read when the engine waits for it
    ch_.recv(1000, 1000);                                  // the heartbeat (and its tag, checked) is consumed
  }
  check_silence();
  return false;
}

bool RemoteDevice::supports(parallel::LocalOp op, DType t) const {
  if (served_) return served_->supports(op, t);
  // A worker before protocol 9.2 does not say: taken for a CPU device with this build's kernels.
  return cpu_kernels_support(op, t);
}

namespace {
// The watch of each group being joined, by its store prefix (unique per group).
std::shared_ptr<GroupWatch> watch_of(const std::string& prefix) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<GroupWatch>> watches;
  std::lock_guard lock(mu);
  std::erase_if(watches, [](const auto& w) { return w.second.expired(); });
  auto& w = watches[prefix];
  auto watch = w.lock();
  if (!watch) w = watch = std::make_shared<GroupWatch>();
  return watch;
}
}  // namespace

void RemoteDevice::begin_join(GroupJoin j) {
  guarded("group setup", [&] {
    if (j.shared) fail("net", "a worker in another process cannot join a shared-memory group");
    watch_ = watch_of(j.net.prefix);
    watch_->members.push_back(this);
    net::ByteWriter w;
    write_group_setup(w, {j.net.store, j.net.prefix, j.rank, j.size, j.wire, j.net.timeout_ms, j.net.host_shm});
    send(MsgType::GroupSetup, w.data());
  });
}

void RemoteDevice::finish_join() {
  guarded("group setup", [&] { await(MsgType::GroupReady); });
}

void RemoteDevice::load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) {
  guarded("load", [&] {
    const auto t0 = Clock::now();
    parallel::DeviceGraph g = graph;
    const std::vector<SliceSpec> specs = plan_slices(g, weights);
    net::ByteWriter w;
    write_graph(w, g);
    write_load_options(w, opt);
    write_model_id(w, model_id_of(weights));
    write_slices(w, specs);
    send(MsgType::Load, w.data());
    net::Frame f = await(MsgType::LoadSource);
    net::ByteReader r(f.payload);
    const uint8_t src = r.u8("load source");
    r.finish("load source");
    if (src >= static_cast<uint8_t>(LoadSource::Count)) fail("net", "load source {} is out of range", src);
    load_report_ = {static_cast<LoadSource>(src), 0, 0};
    if (load_report_.source == LoadSource::Stream) stream_weights(weights, specs);
    await(MsgType::Loaded);
    load_report_.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (coordinator_config().progress && load_report_.source != LoadSource::Stream)
      std::fprintf(stderr, "%s: weights from the worker's %s (nothing streamed), loaded in %.1f s\n", name().c_str(),
                   std::string(load_source_name(load_report_.source)).c_str(), load_report_.seconds);
    else if (coordinator_config().progress)
      std::fprintf(stderr, "%s: loaded in %.1f s\n", name().c_str(), load_report_.seconds);
  });
}

void RemoteDevice::stream_weights(const gguf::File& weights, const std::vector<SliceSpec>& specs) {
  std::vector<TensorHeader> headers;
  uint64_t total = 0;
  for (const auto& s : specs) total += headers.emplace_back(slice_header(s, weights.tensor(s.source))).n_bytes;
  net::ByteWriter hw;
  write_tensor_headers(hw, headers);
  send(MsgType::Tensor, hw.data());
  StreamProgress progress(name(), total);
  // The worker heartbeats while it receives: a live one is heard between chunks, a stopped one
  // stops reading (the send times out) and beating (probe fails). An early reply is its error.
  bool replied = false;
  ChunkSender out([&](std::span<const std::span<const uint8_t>> parts, size_t n) {
    if (replied) return;
    ch_.send_parts(MsgType::TensorChunk, parts, kPeerSilenceMs);
    load_report_.bytes_streamed += n;
    progress.add(n);
    check_peers();
    replied = probe();
  });
  for (size_t i = 0; i < specs.size() && !replied; ++i)
    for_each_piece(specs[i], weights.tensor(specs[i].source),
                   [&](const uint8_t* p, size_t n) { out.add(p, n, /*stable=*/!specs[i].empty); });
  out.flush();
}

void RemoteDevice::submit(Step step) {
  guarded("step", [&] {
    if (in_step_) fail("net", "submit while a step is running");
    net::ByteWriter w;
    write_step(w, step);
    submitted_ = std::chrono::steady_clock::now();
    send(MsgType::Step, w.data());
    in_step_ = true;
  });
}

bool RemoteDevice::poll(int timeout_ms) {
  if (!in_step_) {  // idle: a worker says nothing between steps, so anything readable is its end
    if (ch_.valid() && ch_.socket().readable(0))
      guarded("idle", [&] {
        const net::Frame f = ch_.recv(1000, 1000);  // its closing (throws) or its Error frame
        net::check_frame(f, MsgType::Heartbeat, name());
      });
    return true;
  }
  return guarded("step", [&] {
    if (!ch_.valid()) fail("net", "the connection is closed");  // after abort(), or an earlier failure
    if (probe()) return true;
    return ch_.socket().readable(timeout_ms) && probe();
  });
}

// Ends the session: the worker may sit in a collective with a dead peer until its own timeout,
// and nothing it computes now is wanted.
void RemoteDevice::abort() { ch_.close(); }

StepResult RemoteDevice::wait() {
  return guarded("step", [&] {
    if (!in_step_) fail("net", "wait without a step");
    in_step_ = false;
    net::Frame f = await(MsgType::StepResult);
    round_trip_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted_).count();
    net::ByteReader r(f.payload);
    StepResult res = read_step_result(r, stats_);
    stats_.round_trip_seconds = round_trip_seconds_;
    return res;
  });
}

}  // namespace weft::device::remote
