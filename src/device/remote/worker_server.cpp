#include "device/remote/worker_server.h"

#include "core/error.h"
#include "device/cpu/cpu_device.h"
#include "device/remote/model_store.h"
#include "device/remote/remote_messages.h"
#include "device/remote/weight_slices.h"
#include "gguf/gguf_writer.h"
#include "net/frame.h"
#include "net/handshake.h"
#include "net/kv_store.h"
#include "parallel/gloo_group.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <cstdio>
#include <mutex>
#include <thread>

namespace weft::device::remote {
namespace {

using net::MsgType;
constexpr int kBodyTimeoutMs = 60000;  // once a frame has started, the rest must follow
constexpr int kBusyGraceMs = 500;      // how long a new coordinator waits for an ending session's slot

void send_error(net::Channel& ch, const std::string& text) {
  net::ByteWriter w;
  w.str(text.substr(0, 2000));
  try {
    ch.send(MsgType::Error, w.data(), 1000);
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

// Receives the streamed slices, in the order of specs, into one in-memory GGUF.
std::vector<uint8_t> receive_tensors(net::Channel& s, const std::vector<SliceSpec>& specs) {
  gguf::Writer w;
  for (const auto& spec : specs) {
    net::Frame f = s.expect(MsgType::Tensor, kBodyTimeoutMs, kBodyTimeoutMs);
    net::ByteReader r(f.payload);
    TensorHeader h = read_tensor_header(r);
    r.finish("tensor header");
    if (h.name != spec.name) fail("net", "tensor '{}' arrived where slice {} was announced", h.name, spec.name);
    if (h.shape[0] % block_size(h.type)) fail("net", "tensor '{}': row of {} is not whole blocks", h.name, h.shape[0]);
    uint64_t rows = 1;
    for (size_t d = 1; d < h.shape.size(); ++d) {
      if (rows > (uint64_t{1} << 40) / static_cast<uint64_t>(h.shape[d])) fail("net", "tensor '{}' is too large", h.name);
      rows *= static_cast<uint64_t>(h.shape[d]);
    }
    const uint64_t row = row_bytes(h.type, h.shape[0]);
    if (rows > (uint64_t{1} << 40) / row || row * rows != h.n_bytes)
      fail("net", "tensor '{}': {} bytes do not match its shape and type {}", h.name, h.n_bytes, dtype_name(h.type));
    std::vector<uint8_t> data;  // grows only as bytes really arrive
    while (data.size() < h.n_bytes) {
      net::Frame c = s.expect(MsgType::TensorChunk, kBodyTimeoutMs, kBodyTimeoutMs);
      if (c.payload.empty() || data.size() + c.payload.size() > h.n_bytes)
        fail("net", "tensor '{}': chunk of {} bytes overruns its {} bytes", h.name, c.payload.size(), h.n_bytes);
      data.insert(data.end(), c.payload.begin(), c.payload.end());
    }
    w.add_tensor(h.name, h.type, h.shape, std::move(data));
  }
  return w.to_bytes();
}

// The weights of one session and what they point into (declared so the device can go first).
struct SessionWeights {
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::File> file;
};

}  // namespace

void check_listen(const WorkerOptions& opt) {
  if (opt.key.empty() && !net::is_loopback(opt.listen.host))
    fail("cli", "listening on {} beyond loopback requires --auth-key-file", opt.listen.str());
  if (opt.threads < 1) fail("cli", "-t must be at least 1, got {}", opt.threads);
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
    std::lock_guard lock(mu_);
    if (handshakes_ >= opt_.max_handshakes) continue;  // closed at once: a flood cannot queue up threads
    ++threads_, ++handshakes_;
    std::thread([this, s = std::move(s)]() mutable { connection(std::move(s)); }).detach();
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
    mac = net::server_handshake(s, opt_.key, opt_.handshake_timeout_ms, [&] { return admit(s.peer(), took); });
    ok = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft worker: handshake from %s failed: %s\n", s.peer().c_str(), e.what());
  }
  {
    std::lock_guard lock(mu_);
    --handshakes_;
  }
  if (ok && took) {
    net::Channel ch(std::move(s), std::move(mac));
    std::fprintf(stderr, "weft worker: session from %s\n", ch.peer().c_str());
    try {
      session(ch);
      std::fprintf(stderr, "weft worker: session from %s ended\n", ch.peer().c_str());
    } catch (const std::exception& e) {
      send_error(ch, e.what());
      std::fprintf(stderr, "weft worker: session from %s failed: %s\n", ch.peer().c_str(), e.what());
    }
  }
  std::lock_guard lock(mu_);
  if (took) holder_.clear();
  --threads_;
  cv_.notify_all();
}

void WorkerServer::session(net::Channel& s) {
  const auto load_deadline = Clock::now() + std::chrono::milliseconds(opt_.preload_timeout_ms);
  // Declared so that the device goes first: it may point into the weights.
  std::unique_ptr<parallel::Group> group;
  SessionWeights weights;
  std::unique_ptr<CpuDevice> dev;
  Replier reply(s);
  for (;;) {
    if (!dev) {  // not loaded yet: a session that only holds the slot is dropped soon
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(load_deadline - Clock::now()).count();
      if (!s.socket().readable(static_cast<int>(std::max<int64_t>(left, 0))))
        fail("net", "no load within {} ms of the handshake; session dropped (--preload-timeout)", opt_.preload_timeout_ms);
    }
    net::Frame f = s.recv(opt_.idle_timeout_ms, kBodyTimeoutMs);
    net::ByteReader r(f.payload);
    switch (f.type) {
      case MsgType::GroupSetup: {
        if (dev) fail("net", "group setup after load");
        const GroupSetup g = read_group_setup(r);
        r.finish("group setup");
        reply.busy();
        group = parallel::make_gloo_group(g.rank, g.size, g.wire,
                                          {g.store, g.prefix, s.socket().local_host(), g.timeout_ms,
                                           parallel::resolve_busy_poll(opt_.net_poll, opt_.threads),
                                           parallel::kSyncAllReduceMaxBytes, net::rendezvous_key(opt_.key, g.prefix)});
        reply.send(MsgType::GroupReady, {});
        break;
      }
      case MsgType::Load: {
        if (dev) fail("net", "a session loads once");
        const parallel::DeviceGraph graph = read_graph(r);
        const LoadOptions lo = read_load_options(r);
        const ModelId model = read_model_id(r);
        const std::vector<SliceSpec> specs = read_slices(r);
        r.finish("load");
        reply.busy();  // hashing a local model file may take seconds
        LoadSource source = LoadSource::Stream;
        std::string path;
        if (model.known() && !opt_.model_dir.empty())
          if (auto p = find_model(opt_.model_dir, model)) source = LoadSource::ModelDir, path = *p;
        const std::string key = model.known() ? slices_key(model, specs) : "";
        if (source == LoadSource::Stream && !key.empty() && !opt_.cache_dir.empty() &&
            std::filesystem::exists(cache_path(opt_.cache_dir, key)))
          source = LoadSource::Cache, path = cache_path(opt_.cache_dir, key);
        net::ByteWriter w;
        w.u8(static_cast<uint8_t>(source));
        reply.send(MsgType::LoadSource, w.data());
        std::fprintf(stderr, "weft worker: weights of %s: %s%s%s\n", model.file_name.c_str(),
                     std::string(load_source_name(source)).c_str(), path.empty() ? "" : " ", path.c_str());

        if (source == LoadSource::Stream) {
          weights.bytes = receive_tensors(s, specs);
          reply.busy();
          if (!key.empty() && !opt_.cache_dir.empty()) cache_store(opt_.cache_dir, key, weights.bytes);
        } else if (source == LoadSource::ModelDir) {
          weights.bytes = cut_slices(*gguf::File::open(path), specs);
        }
        weights.file = source == LoadSource::Cache
                           ? gguf::File::open(path)
                           : gguf::File::parse(weights.bytes.data(), weights.bytes.size(), "weights from " + s.peer());
        for (const auto& spec : specs)  // a cache file is trusted only as far as it holds every slice
          if (!weights.file->find_tensor(spec.name)) fail("net", "weights lack slice {} ({})", spec.name, spec.source);
        CpuDeviceOptions o;
        o.n_threads = opt_.threads;
        o.spin = false;  // the worker cannot know what else runs on its cores
        o.map_weights = source != LoadSource::Cache;  // the slices are already in this process's memory
        dev = std::make_unique<CpuDevice>(o);
        if (group) dev->attach_group(std::move(group));
        dev->load(graph, *weights.file, lo);
        reply.send(MsgType::Loaded, {});
        break;
      }
      case MsgType::Step: {
        if (!dev) fail("net", "step before load");
        reply.busy();
        dev->submit(read_step(r));
        StepResult res = dev->wait();
        net::ByteWriter w;
        write_step_result(w, res, dev->stats());
        reply.send(MsgType::StepResult, w.data());
        break;
      }
      case MsgType::Truncate: {
        if (!dev) fail("net", "truncate before load");
        const int32_t pos = r.i32("truncate position");
        r.finish("truncate");
        if (pos < 0) fail("net", "truncate at {}", pos);
        reply.busy();
        dev->truncate_cache(pos);
        reply.send(MsgType::Truncated, {});
        break;
      }
      case MsgType::Bye:
        return;
      default:
        fail("net", "unexpected {} message in a session", net::msg_type_name(f.type));
    }
  }
}

}  // namespace weft::device::remote
