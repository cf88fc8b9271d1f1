#include "device/remote/remote_device.h"

#include "device/cpu/cpu_device.h"

#include "core/error.h"
#include "kernels/quants.h"
#include "net/content_hash.h"
#include "net/handshake.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace weft::device::remote {
namespace {

using net::MsgType;

constexpr size_t kChunkBytes = 8u << 20;  // weight bytes per TensorChunk frame (limit is 16 MiB)
// A send must progress within this; a worker that stops reading (host down) fails the send.
constexpr int kSendTimeoutMs = 15000;
constexpr int kPollMs = 100;          // how often a wait looks at the group's other workers
constexpr int kBodyTimeoutMs = 60000;  // once a frame has started, the rest must follow

CoordinatorConfig& config() {
  static CoordinatorConfig c;
  return c;
}

ModelId model_id(const gguf::File& f) {
  if (f.path().empty()) return {};  // parsed from memory: nothing a worker could have a copy of
  return {f.file_size(), net::sha256_file_hex(f.path()), std::filesystem::path(f.path()).filename().string()};
}

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
    net::Socket s = net::connect_tcp(net::parse_host_port(address), kConnectTimeoutMs);
    net::SessionMac mac = net::client_handshake(s, key);
    ch_ = net::Channel(std::move(s), std::move(mac));
  });
}

RemoteDevice::~RemoteDevice() {
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
    std::string text = e.what();
    if (text.rfind("[" + e.origin() + "] ", 0) == 0) text.erase(0, e.origin().size() + 3);  // Error adds it again
    if (watch_ && watch_->failed.empty()) watch_->failed = text.find(name()) == 0 ? text : name() + ": " + text;
    if (text.rfind("tcp://", 0) == 0) throw Error("net", text);  // already names the worker at fault
    throw Error("net", fmt::format("{}: {}: {}", name(), what, text));
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
      if (f.type == MsgType::Error) {
        net::ByteReader r(f.payload);
        fail("net", "{}: {}", name(), r.str("error text", net::max_payload(MsgType::Error)));
      }
      if (f.type != want)
        fail("net", "{}: expected a {} message, got {}", name(), net::msg_type_name(want), net::msg_type_name(f.type));
      return f;
    }
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
    if (silent > kPeerSilenceMs)
      fail("net", "{}: no reply or heartbeat for {} ms: the worker or its host is down or hung", name(), silent);
  }
}

void RemoteDevice::check_peers() {
  if (!watch_) return;
  if (!watch_->failed.empty()) fail("net", "{} (this group's step cannot finish)", watch_->failed);
  for (RemoteDevice* p : watch_->members)
    if (p != this && p->in_step_ && p->ch_.valid()) p->guarded("step", [&] { p->probe(); });
}

bool RemoteDevice::probe() {
  std::array<uint8_t, net::kFrameHeaderBytes> h;
  while (ch_.socket().peek(h.data(), h.size()) == h.size()) {
    MsgType t;
    const uint32_t len = net::parse_frame_header(h, t);
    last_heard_ = Clock::now();
    if (t != MsgType::Heartbeat || len != 0) return true;  // its reply: read when the engine waits for it
    ch_.recv(1000, 1000);  // the heartbeat (and its tag, checked) is consumed
  }
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
  if (silent > kPeerSilenceMs)
    fail("net", "{}: no reply or heartbeat for {} ms: the worker or its host is down or hung", name(), silent);
  return false;
}

bool RemoteDevice::supports(parallel::LocalOp op, DType t) const {
  // The worker is this same build running CpuDevice, so it has exactly this process's kernels.
  return cpu_kernels_support(op, t);
}

void RemoteDevice::attach_group(std::unique_ptr<parallel::Group>) {
  fail("net", "{}: a remote device's group lives on the worker; use start_group", name());
}

void RemoteDevice::start_group(const GroupSetup& g) {
  guarded("group setup", [&] {
    net::ByteWriter w;
    write_group_setup(w, g);
    send(MsgType::GroupSetup, w.data());
  });
}

void RemoteDevice::finish_group() {
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
    write_model_id(w, model_id(weights));
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
      std::fprintf(stderr, "%s: weights from the worker's %s (nothing streamed)\n", name().c_str(),
                   std::string(load_source_name(load_report_.source)).c_str());
  });
}

void RemoteDevice::stream_weights(const gguf::File& weights, const std::vector<SliceSpec>& specs) {
  uint64_t total = 0;
  for (const auto& s : specs) total += slice_header(s, weights.tensor(s.source)).n_bytes;
  const bool tty = coordinator_config().progress && ::isatty(2);
  const auto t0 = Clock::now();
  auto last_shown = t0;
  auto show = [&](bool done) {
    const double mib = 1.0 / (1 << 20), s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (done && coordinator_config().progress)
      std::fprintf(stderr, "%s%s: streamed %.1f MiB of weights in %.1f s\n", tty ? "\r\033[K" : "", name().c_str(),
                   load_report_.bytes_streamed * mib, s);
    else if (tty)
      std::fprintf(stderr, "\r\033[K%s: streaming weights %3.0f%% (%.0f / %.0f MiB)", name().c_str(),
                   100.0 * load_report_.bytes_streamed / std::max<uint64_t>(total, 1), load_report_.bytes_streamed * mib,
                   total * mib);
  };
  std::vector<uint8_t> chunk;
  auto flush = [&] {
    if (chunk.empty()) return;
    send(MsgType::TensorChunk, chunk);
    load_report_.bytes_streamed += chunk.size();
    chunk.clear();
    if (Clock::now() - last_shown > std::chrono::milliseconds(200)) {
      show(false);
      last_shown = Clock::now();
    }
  };
  for (const auto& s : specs) {
    const auto& src = weights.tensor(s.source);
    net::ByteWriter hw;
    write_tensor_header(hw, slice_header(s, src));
    send(MsgType::Tensor, hw.data());
    for_each_piece(s, src, [&](const uint8_t* p, size_t n) {
      while (n > 0) {
        const size_t take = std::min(n, kChunkBytes - chunk.size());
        chunk.insert(chunk.end(), p, p + take);
        p += take;
        n -= take;
        if (chunk.size() == kChunkBytes) flush();
      }
    });
    flush();  // chunks never span two tensors
  }
  show(true);
}

void RemoteDevice::submit(Step step) {
  guarded("step", [&] {
    if (in_step_) fail("net", "submit while a step is running");
    net::ByteWriter w;
    write_step(w, step);
    send(MsgType::Step, w.data());
    in_step_ = true;
  });
}

bool RemoteDevice::poll(int timeout_ms) {
  return guarded("step", [&] {
    if (!in_step_) return true;
    if (!ch_.valid()) fail("net", "the connection is closed");
    if (probe()) return true;
    return ch_.socket().readable(timeout_ms) && probe();
  });
}

// Ends the session: the worker may sit in a collective with a dead peer until its own timeout,
// and nothing it computes now is wanted.
void RemoteDevice::abort() {
  ch_.close();
}

StepResult RemoteDevice::wait() {
  return guarded("step", [&] {
    if (!in_step_) fail("net", "wait without a step");
    in_step_ = false;
    net::Frame f = await(MsgType::StepResult);
    net::ByteReader r(f.payload);
    return read_step_result(r, stats_);
  });
}

void RemoteDevice::truncate_cache(int32_t pos) {
  guarded("truncate", [&] {
    net::ByteWriter w;
    w.i32(pos);
    send(MsgType::Truncate, w.data());
    await(MsgType::Truncated);
  });
}

}  // namespace weft::device::remote
