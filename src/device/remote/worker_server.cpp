#include "device/remote/worker_server.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/device_kind.h"
#include "device/remote/model_store.h"
#include "device/remote/remote_messages.h"
#include "device/remote/weight_slices.h"
#include "net/frame.h"
#include "net/handshake.h"
#include "net/kv_store.h"
#include "parallel/gloo_group.h"
#include "parallel/memory_fit.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

namespace weft::device::remote {
namespace {

using net::MsgType;
constexpr int kBodyTimeoutMs = 60000;  // once a frame has started, the rest must follow
constexpr int kBusyGraceMs = 500;      // how long a new coordinator waits for an ending session's slot

// "tcp://10.0.0.2:51234" -> "10.0.0.2": the address handshakes are counted by.
std::string peer_host(const std::string& peer) {
  const size_t begin = peer.find("://") == std::string::npos ? 0 : peer.find("://") + 3;
  const size_t colon = peer.rfind(':');
  return peer.substr(begin, colon == std::string::npos || colon < begin ? std::string::npos : colon - begin);
}

void send_error(net::Channel& ch, const Error& e) {
  try {
    ch.send(MsgType::Error, net::error_payload(e), 1000);
  } catch (const Error&) {  // the coordinator may be gone already
  }
}

// Sends the session's frames, and heartbeats from a thread of its own while the worker is busy
// with a request. Every send takes the one mutex, so frames never interleave on the socket.
class Replier {
 public:
  explicit Replier(net::Channel& ch) : ch_(ch), thread_([this] { loop(); }) {}
  ~Replier() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // From now until the next send(): heartbeats.
  void busy() {
    std::lock_guard lock(mu_);
    busy_ = true;
  }
  // Ends the busy period with a reply.
  void send(MsgType t, std::span<const uint8_t> payload) {
    std::lock_guard lock(mu_);
    busy_ = false;
    ch_.send(t, payload, kBodyTimeoutMs);
  }
  // A frame within the busy period (heartbeats go on after it).
  void send_busy(MsgType t, std::span<const uint8_t> payload) {
    std::lock_guard lock(mu_);
    ch_.send(t, payload, kBodyTimeoutMs);
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(kHeartbeatIntervalMs));
      if (stop_ || !busy_ || gone_) continue;
      try {
        ch_.send(MsgType::Heartbeat, {}, 1000);
      } catch (const Error&) {
        gone_ = true;  // the coordinator is gone; the session ends when the request's reply fails
      }
    }
  }

  net::Channel& ch_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false, gone_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// Receives the streamed slices: every header in one frame (checked against the announced specs,
// so the image is laid out once), then their bytes back to back, straight into the image.
std::unique_ptr<SliceImage> receive_slices(net::Channel& s, const std::vector<SliceSpec>& specs) {
  net::Frame f = s.expect(MsgType::Tensor, kBodyTimeoutMs, kBodyTimeoutMs);
  net::ByteReader r(f.payload);
  const std::vector<TensorHeader> headers = read_tensor_headers(r);
  r.finish("tensor headers");
  if (headers.size() != specs.size())
    fail("net", "{} tensor headers for {} announced slices", headers.size(), specs.size());
  uint64_t left = 0;  // bytes still to come
  for (size_t i = 0; i < specs.size(); ++i) {
    if (headers[i].name != specs[i].name)
      fail("net", "tensor '{}' arrived where slice {} was announced", headers[i].name, specs[i].name);
    left += headers[i].n_bytes;
  }
  auto image = std::make_unique<SliceImage>(headers);
  size_t i = 0;
  uint64_t at = 0;  // bytes of tensor i received
  while (left > 0) {
    MsgType t;
    const uint64_t len = s.recv_header(t, kBodyTimeoutMs);
    if (t != MsgType::TensorChunk)
      fail("net", "expected a {} message, got {}", net::msg_type_name(MsgType::TensorChunk), net::msg_type_name(t));
    if (len == 0 || len > left) fail("net", "chunk of {} bytes where {} remain", len, left);
    left -= len;
    std::vector<std::span<uint8_t>> parts;  // a chunk may span slices: one part per slice
    for (uint64_t n = len; n > 0;) {
      const uint64_t take = std::min(n, headers[i].n_bytes - at);
      parts.emplace_back(image->tensor_data(i) + at, take);
      n -= take;
      if ((at += take) == headers[i].n_bytes) ++i, at = 0;
    }
    s.recv_payload_into(parts, kBodyTimeoutMs);
  }
  return image;
}

// Where one session's weights came from: the streamed slices in memory, or the file to map (the
// model in --model-dir, whose tensors the graph is then pointed at, or a cache entry).
struct Gathered {
  LoadSource source = LoadSource::Stream;
  std::string path;
  std::string cache_key;  // streamed slices to cache under this key ("" : none)
  std::unique_ptr<SliceImage> image;
};

// Tells the coordinator where this session's weights come from and gets them.
Gathered gather_weights(const WorkerOptions& opt, net::Channel& s, Replier& reply, const ModelId& model,
                        const std::vector<SliceSpec>& specs) {
  const auto t0 = std::chrono::steady_clock::now();
  Gathered g;
  if (model.known() && !opt.model_dir.empty())
    if (auto p = find_model(opt.model_dir, model)) g.source = LoadSource::ModelDir, g.path = *p;
  const std::string key = model.known() && !opt.cache_dir.empty() ? slices_key(model, specs) : "";
  if (g.source == LoadSource::Stream && !key.empty())
    if (auto p = cache_find(opt.cache_dir, key)) g.source = LoadSource::Cache, g.path = *p;
  net::ByteWriter w;
  w.u8(static_cast<uint8_t>(g.source));
  reply.send_busy(MsgType::LoadSource, w.data());
  std::fprintf(stderr, "weft worker: weights of %s: %s%s%s (found in %.1f s)\n", model.file_name.c_str(),
               std::string(load_source_name(g.source)).c_str(), g.path.empty() ? "" : " ", g.path.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (g.source == LoadSource::Stream) {
    g.image = receive_slices(s, specs);
    g.cache_key = key;
  }
  return g;
}

// The weights of one session and what they point into (declared so the device can go first).
struct SessionWeights {
  std::unique_ptr<SliceImage> image;
  std::unique_ptr<gguf::File> file;
};

// One session's state, declared in the order it must go: the device first (it may point into the
// weights), then the cache writer (it reads them), then the weights.
struct Session {
  SessionWeights weights;
  std::jthread cache_writer;
  std::unique_ptr<Device> dev;
  bool loaded = false;
  double served_seconds = 0;  // steps, from their message to the reply (DeviceStats)
};

// GroupSetup: this worker's device joins the coordinator's network group as its rank.
void join_group(const WorkerOptions& opt, net::Channel& s, Replier& reply, Session& ss, net::ByteReader& r) {
  if (ss.loaded) fail("net", "group setup after load");
  const GroupSetup g = read_group_setup(r);
  r.finish("group setup");
  reply.busy();
  NetworkGroup net{g.store,
                   g.prefix,
                   net::rendezvous_key(opt.key, g.prefix),
                   s.socket().local_host(),
                   parallel::resolve_busy_poll(opt.net_poll, opt.threads),
                   g.timeout_ms,
                   g.host_shm};
  ss.dev->begin_join({g.rank, g.size, g.wire, nullptr, std::move(net)});
  ss.dev->finish_join();
  const std::string_view over = ss.dev->group_transport();
  std::fprintf(stderr, "weft worker: rank %d of %d, all-reduces over %.*s\n", g.rank, g.size,
               static_cast<int>(over.size()), over.data());
  reply.send(MsgType::GroupReady, {});
}

// Load: the weights from where this worker finds them (or as streamed), then the device.
void load(const WorkerOptions& opt, net::Channel& s, Replier& reply, Session& ss, net::ByteReader& r) {
  if (ss.loaded) fail("net", "a session loads once");
  parallel::DeviceGraph graph = read_graph(r);
  const LoadOptions lo = read_load_options(r);
  const ModelId model = read_model_id(r);
  const std::vector<SliceSpec> specs = read_slices(r);
  r.finish("load");
  // A caller bypassing load_devices' check may send a plan past the limit: it is refused before
  // any byte moves.
  const uint64_t need = parallel::device_bytes(graph, kv_sizing(lo));
  if (opt.memory_limit_bytes > 0 && need > opt.memory_limit_bytes)
    fail("worker",
         "the plan gives this worker {:.1f} MiB of weights and KV cache, over its --memory-limit of {:.1f} MiB",
         need / 1048576.0, opt.memory_limit_bytes / 1048576.0);
  reply.busy();  // until Loaded: hashing, receiving, copying and caching take seconds
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Gathered g = gather_weights(opt, s, reply, model, specs);
  SessionWeights& weights = ss.weights;
  weights.image = std::move(g.image);
  if (opt.load_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt.load_delay_ms));
  weights.file = weights.image ? gguf::File::parse(weights.image->bytes().data(), weights.image->bytes().size(),
                                                   "weights from " + s.peer())
                               : gguf::File::open(g.path);
  if (g.source == LoadSource::ModelDir)
    unplan_slices(graph, specs, *weights.file);
  else
    for (const auto& spec : specs)  // a cache file is trusted only as far as it holds every slice
      if (!weights.file->find_tensor(spec.name)) fail("net", "weights lack slice {} ({})", spec.name, spec.source);
  std::fprintf(stderr, "weft worker: weights in memory after %.1f s\n", secs());
  // Hashing and writing GiBs to disk (fsync) takes longer than the rest of the load: the entry is
  // written while the session goes on, and finished before the next one starts.
  if (!g.cache_key.empty())
    ss.cache_writer = std::jthread([&opt, key = g.cache_key, bytes = weights.image->bytes()] {
      try {
        cache_store(opt.cache_dir, key, bytes, opt.cache_max_bytes);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "weft worker: could not cache weights: %s\n", e.what());
      }
    });
  ss.dev->load(graph, *weights.file, lo);
  ss.loaded = true;
  std::fprintf(stderr, "weft worker: device loaded after %.1f s\n", secs());
  reply.send(MsgType::Loaded, {});
}

// Waits for the running step while watching the coordinator's connection. The coordinator sends
// nothing during a step, so the connection closing means it died: the other ranks may never reach
// this step's collectives, and sitting in them until the group's timeout would keep this worker
// busy for the next coordinator. The device is aborted instead; its wait() then fails at once.
void watch_coordinator(net::Channel& s, Device& dev) {
  constexpr int kWatchMs = 20;
  while (!dev.poll(kWatchMs)) {
    if (!s.socket().readable(0)) continue;
    uint8_t byte;
    try {
      s.socket().peek(&byte, 1);
    } catch (const Error&) {
      dev.abort();
      return;
    }
  }
}

}  // namespace

void check_listen(const WorkerOptions& opt) {
  if (opt.key.empty() && !net::is_loopback(opt.listen.host))
    fail("cli", "listening on {} beyond loopback requires --auth-key-file", opt.listen.str());
  if (opt.threads < 1) fail("cli", "-t must be at least 1, got {}", opt.threads);
}

DeviceMemory served_memory(const WorkerOptions& opt, const DeviceMemory& m) {
  if (opt.memory_limit_bytes == 0) return m;
  const uint64_t limit = opt.memory_limit_bytes;
  if (!m.known()) return {limit, limit, true};
  return {std::min(m.total_bytes, limit), std::min(m.free_bytes, limit), true};
}

DeviceSpec served_device(const WorkerOptions& opt) {
  return opt.device.value_or(DeviceSpec{DeviceSpec::Kind::Cpu, opt.threads, -1, ""});
}

void serve_device(WorkerOptions& opt, const std::string& list) {
  const std::vector<DeviceSpec> specs = parse_devices(list);
  if (specs.size() != 1) fail("cli", "--devices: a worker serves one device, got {} in '{}'", specs.size(), list);
  const DeviceKind& kind = device_kind(specs[0].kind);
  if (!kind.local) fail("cli", "--devices: a worker serves a device of this machine, not '{}'", list);
  opt.device = specs[0];
  opt.threads = std::max(1, kind.host_threads(specs[0]));
}

WorkerServer::WorkerServer(WorkerOptions opt) : opt_(std::move(opt)), listener_(opt_.listen) { check_listen(opt_); }

void WorkerServer::serve(int max_sessions) {
  {
    std::lock_guard lock(mu_);
    max_sessions_ = max_sessions;
  }
  auto done = [&] { return stop_ || (max_sessions >= 0 && admitted_ >= max_sessions); };
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (done()) break;
    }
    net::Socket s = listener_.accept(200);
    if (!s.valid()) continue;
    std::string refused;
    {
      std::lock_guard lock(mu_);
      const std::string host = peer_host(s.peer());
      const int from_host = handshakes_from_.contains(host) ? handshakes_from_[host] : 0;
      if (handshakes_ >= opt_.max_handshakes || from_host >= opt_.max_handshakes_per_host) {
        refused = fmt::format("worker busy: {} connections in their handshake ({} from {}); try again", handshakes_,
                              from_host, host);
      } else {
        ++threads_, ++handshakes_, ++handshakes_from_[host];
        std::thread([this, s = std::move(s)]() mutable { connection(std::move(s)); }).detach();
        continue;
      }
    }
    // Answered here, without a thread: a flood cannot queue up threads.
    net::refuse_busy(s, refused);
  }
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return threads_ == 0; });  // the detached threads use this object
}

std::string WorkerServer::admit(const std::string& peer, bool& took) {
  std::unique_lock lock(mu_);
  // A coordinator that ran just before this one may have sent its Bye a moment ago: give its session
  // time to end rather than calling the worker busy.
  cv_.wait_for(lock, std::chrono::milliseconds(kBusyGraceMs), [&] { return holder_.empty(); });
  if (stop_ || (max_sessions_ >= 0 && admitted_ >= max_sessions_)) return "worker is shutting down";
  if (!holder_.empty())
    return fmt::format("worker busy: serving a session from {} since {} s", holder_,
                       std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - held_since_).count());
  holder_ = peer;
  held_since_ = Clock::now();
  ++admitted_;
  took = true;
  return "";
}

void WorkerServer::connection(net::Socket s) {
  bool took = false, ok = false;
  net::SessionMac mac;
  try {
    mac = net::server_handshake(s, opt_.key, opt_.handshake_timeout_ms, [&] { return admit(s.peer(), took); }, {});
    ok = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft worker: handshake from %s failed: %s\n", s.peer().c_str(), e.what());
  }
  {
    std::lock_guard lock(mu_);
    --handshakes_;
    if (const std::string host = peer_host(s.peer()); --handshakes_from_[host] == 0) handshakes_from_.erase(host);
  }
  if (ok && took) {
    net::Channel ch(std::move(s), std::move(mac));
    std::fprintf(stderr, "weft worker: session from %s\n", ch.peer().c_str());
    try {
      session(ch);
      std::fprintf(stderr, "weft worker: session from %s ended\n", ch.peer().c_str());
    } catch (const Error& e) {
      send_error(ch, e);
      std::fprintf(stderr, "weft worker: session from %s failed: %s\n", ch.peer().c_str(), e.what());
    } catch (const std::exception& e) {
      send_error(ch, Error("worker", e.what()));
      std::fprintf(stderr, "weft worker: session from %s failed: %s\n", ch.peer().c_str(), e.what());
    }
    // The slot is free before the connection closes: a coordinator that saw it close (a probe,
    // worker_discovery.h) is admitted when it comes back at once.
    std::lock_guard lock(mu_);
    holder_.clear();
    took = false;
  }
  std::lock_guard lock(mu_);
  if (took) holder_.clear();
  --threads_;
  cv_.notify_all();
}

void WorkerServer::session(net::Channel& s) {
  const auto load_deadline = Clock::now() + std::chrono::milliseconds(opt_.preload_timeout_ms);
  Session ss;
  const DeviceSpec spec = served_device(opt_);
  CreateContext ctx;
  ctx.cores = hardware_cores();
  ctx.spin = false;  // the worker cannot know what else runs on its cores
  // The slices are in this process's memory already, or in a file mapping to read as --mmap does
  // (a copy would cost as long as the rest of the load; only column slices are copied).
  ctx.map_weights = true;
  ctx.repack_mapped = true;  // except matmul weights the kernels read as panels: repacked once
  Replier reply(s);
  reply.busy();  // the coordinator waits for DeviceInfo: a GPU may take a while to open
  ss.dev = device_kind(spec.kind).create(spec, ctx);
  {
    ServedDevice info = ServedDevice::of(*ss.dev);
    info.memory = served_memory(opt_, info.memory);
    net::ByteWriter w;
    write_served_device(w, info);
    reply.send(MsgType::DeviceInfo, w.data());
  }
  for (;;) {
    if (!ss.loaded) {  // a session that only holds the slot is dropped soon
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(load_deadline - Clock::now()).count();
      if (!s.socket().readable(static_cast<int>(std::max<int64_t>(left, 0))))
        fail("net", "no load within {} ms of the handshake; session dropped (--preload-timeout)",
             opt_.preload_timeout_ms);
    }
    net::Frame f = s.recv(opt_.idle_timeout_ms, kBodyTimeoutMs);
    net::ByteReader r(f.payload);
    switch (f.type) {
      case MsgType::GroupSetup: join_group(opt_, s, reply, ss, r); break;
      case MsgType::Load: load(opt_, s, reply, ss, r); break;
      case MsgType::Step: {
        if (!ss.loaded) fail("net", "step before load");
        const auto t0 = Clock::now();
        reply.busy();
        ss.dev->submit(read_step(r));
        watch_coordinator(s, *ss.dev);
        StepResult res = ss.dev->wait();
        DeviceStats st = ss.dev->stats();
        ss.served_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        st.served_seconds = ss.served_seconds;  // up to here: the reply's encoding and send are left out
        net::ByteWriter w;
        write_step_result(w, res, st);
        reply.send(MsgType::StepResult, w.data());
        break;
      }
      case MsgType::Bye: return;
      default: fail("net", "unexpected {} message in a session", net::msg_type_name(f.type));
    }
  }
}

}  // namespace weft::device::remote
