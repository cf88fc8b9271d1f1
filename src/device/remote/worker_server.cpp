#include "device/remote/worker_server.h"

#include "core/error.h"
#include "device/cpu/cpu_device.h"
#include "device/remote/remote_messages.h"
#include "gguf/gguf_writer.h"
#include "net/frame.h"
#include "net/handshake.h"
#include "parallel/gloo_group.h"

#include <cstdio>

namespace weft::device::remote {
namespace {

constexpr int kBodyTimeoutMs = 60000;  // once a frame has started, the rest must follow

void send_error(net::Socket& s, const std::string& text) {
  net::ByteWriter w;
  w.str(text.substr(0, 2000));
  try {
    net::send_frame(s, net::MsgType::Error, w.data(), 1000);
  } catch (const Error&) {  // the coordinator may be gone already
  }
}

// Receives the weight slices announced by a Load message into one in-memory GGUF.
std::vector<uint8_t> receive_tensors(net::Socket& s, uint32_t n_tensors) {
  gguf::Writer w;
  for (uint32_t i = 0; i < n_tensors; ++i) {
    net::Frame f = net::expect_frame(s, net::MsgType::Tensor, kBodyTimeoutMs, kBodyTimeoutMs);
    net::ByteReader r(f.payload);
    TensorHeader h = read_tensor_header(r);
    r.finish("tensor header");
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
      net::Frame c = net::expect_frame(s, net::MsgType::TensorChunk, kBodyTimeoutMs, kBodyTimeoutMs);
      if (c.payload.empty() || data.size() + c.payload.size() > h.n_bytes)
        fail("net", "tensor '{}': chunk of {} bytes overruns its {} bytes", h.name, c.payload.size(), h.n_bytes);
      data.insert(data.end(), c.payload.begin(), c.payload.end());
    }
    w.add_tensor(h.name, h.type, h.shape, std::move(data));
  }
  return w.to_bytes();
}

}  // namespace

void check_listen(const WorkerOptions& opt) {
  if (opt.key.empty() && !net::is_loopback(opt.listen.host))
    fail("cli", "listening on {} beyond loopback requires --auth-key-file", opt.listen.str());
  if (opt.threads < 1) fail("cli", "-t must be at least 1, got {}", opt.threads);
}

WorkerServer::WorkerServer(WorkerOptions opt) : opt_(std::move(opt)), listener_(opt_.listen) { check_listen(opt_); }

void WorkerServer::serve(int max_sessions) {
  for (int n = 0; !stop_ && (max_sessions < 0 || n < max_sessions);) {
    net::Socket s = listener_.accept(200);
    if (!s.valid()) continue;
    ++n;
    std::fprintf(stderr, "weft worker: session from %s\n", s.peer().c_str());
    try {
      session(s);
      std::fprintf(stderr, "weft worker: session from %s ended\n", s.peer().c_str());
    } catch (const std::exception& e) {
      send_error(s, e.what());
      std::fprintf(stderr, "weft worker: session from %s failed: %s\n", s.peer().c_str(), e.what());
    }
  }
}

void WorkerServer::session(net::Socket& s) {
  using net::MsgType;
  net::server_handshake(s, opt_.key);
  // Declared so that the device goes first: it may point into weights, which point into gguf_bytes.
  std::unique_ptr<parallel::Group> group;
  std::vector<uint8_t> gguf_bytes;
  std::unique_ptr<gguf::File> weights;
  std::unique_ptr<CpuDevice> dev;
  for (;;) {
    net::Frame f = net::recv_frame(s, opt_.idle_timeout_ms, kBodyTimeoutMs);
    net::ByteReader r(f.payload);
    switch (f.type) {
      case MsgType::GroupSetup: {
        if (dev) fail("net", "group setup after load");
        const GroupSetup g = read_group_setup(r);
        r.finish("group setup");
        group = parallel::make_gloo_group(g.rank, g.size, g.wire, {g.store, g.prefix, s.local_host(), g.timeout_ms});
        net::send_frame(s, MsgType::GroupReady, {}, kBodyTimeoutMs);
        break;
      }
      case MsgType::Load: {
        if (dev) fail("net", "a session loads once");
        const parallel::DeviceGraph graph = read_graph(r);
        const LoadOptions lo = read_load_options(r);
        const uint32_t n_tensors = r.count("tensor count", kMaxTensors, 0);
        r.finish("load");
        gguf_bytes = receive_tensors(s, n_tensors);
        weights = gguf::File::parse(gguf_bytes.data(), gguf_bytes.size(), "weights from " + s.peer());
        CpuDeviceOptions o;
        o.n_threads = opt_.threads;
        o.spin = false;  // the worker cannot know what else runs on its cores
        dev = std::make_unique<CpuDevice>(o);
        if (group) dev->attach_group(std::move(group));
        dev->load(graph, *weights, lo);
        net::send_frame(s, MsgType::Loaded, {}, kBodyTimeoutMs);
        break;
      }
      case MsgType::Step: {
        if (!dev) fail("net", "step before load");
        dev->submit(read_step(r));
        StepResult res = dev->wait();
        net::ByteWriter w;
        write_step_result(w, res, dev->stats());
        net::send_frame(s, MsgType::StepResult, w.data(), kBodyTimeoutMs);
        break;
      }
      case MsgType::Truncate: {
        if (!dev) fail("net", "truncate before load");
        const int32_t pos = r.i32("truncate position");
        r.finish("truncate");
        if (pos < 0) fail("net", "truncate at {}", pos);
        dev->truncate_cache(pos);
        net::send_frame(s, MsgType::Truncated, {}, kBodyTimeoutMs);
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
