#include "device/remote/remote_device.h"

#include "core/error.h"
#include "kernels/quants.h"
#include "net/frame.h"
#include "net/handshake.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

namespace weft::device::remote {
namespace {

using Kind = parallel::WeightSlice::Kind;
using net::MsgType;

constexpr size_t kChunkBytes = 8u << 20;  // weight bytes per TensorChunk frame (limit is 16 MiB)
constexpr int kSendTimeoutMs = 60000;

// One weight slice as the worker will hold it: a whole tensor of its own.
struct SliceTensor {
  std::string name;
  const gguf::TensorInfo* src;
  Kind kind;
  parallel::Range range;
  // An empty Rows/Cols slice (this device holds none of it) still needs a tensor of the right
  // other dimension: one zero row ({cols, 1}) or one zero block per row ({block, rows}).
  bool empty = false;
};

// Bytes of slice t, in the layout of the whole tensor it becomes; emitted in pieces to `out`.
template <typename Out>
void for_each_piece(const SliceTensor& t, Out&& out) {
  const auto& s = *t.src;
  const int64_t cols = s.shape[0], rows = s.n_elements() / cols;
  const size_t stride = row_bytes(s.type, cols);
  if (t.empty) {
    const std::vector<uint8_t> zeros(t.kind == Kind::Rows ? stride : row_bytes(s.type, block_size(s.type)) * rows);
    out(zeros.data(), zeros.size());
  } else if (t.kind == Kind::Rows) {
    out(s.data + stride * t.range.begin, stride * t.range.size());
  } else if (t.kind == Kind::Cols) {
    const size_t off = row_bytes(s.type, t.range.begin), n = row_bytes(s.type, t.range.size());
    for (int64_t r = 0; r < rows; ++r) out(s.data + stride * r + off, n);
  } else {
    out(s.data, s.n_bytes);
  }
}

}  // namespace

std::vector<uint8_t> coordinator_key() {
  const char* path = std::getenv("WEFT_AUTH_KEY_FILE");
  return path && *path ? net::read_key_file(path) : std::vector<uint8_t>{};
}

RemoteDevice::RemoteDevice(const std::string& address, int threads, const std::vector<uint8_t>& key)
    : address_(address), threads_(threads) {
  guarded("connect", [&] {
    sock_ = net::connect_tcp(net::parse_host_port(address), kConnectTimeoutMs);
    net::client_handshake(sock_, key);
  });
}

RemoteDevice::~RemoteDevice() {
  if (!sock_.valid()) return;
  try {
    net::send_frame(sock_, MsgType::Bye, {}, 1000);
  } catch (const Error&) {  // the worker is gone already; nothing to end
  }
}

template <typename F>
auto RemoteDevice::guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    sock_.close();
    const std::string text = e.what();
    if (text.find(name()) != std::string::npos) throw Error("net", text);
    throw Error("net", fmt::format("{}: {}: {}", name(), what, text));
  }
}

bool RemoteDevice::supports(parallel::LocalOp op, DType t) const {
  // The worker is this same build running CpuDevice, so it has exactly this process's kernels.
  if (op != parallel::LocalOp::MatMul && op != parallel::LocalOp::Embed) return op < parallel::LocalOp::Count;
  try {
    kernels::kernels_for(t);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void RemoteDevice::attach_group(std::unique_ptr<parallel::Group>) {
  fail("net", "{}: a remote device's group lives on the worker; use start_group", name());
}

void RemoteDevice::start_group(const GroupSetup& g) {
  guarded("group setup", [&] {
    net::ByteWriter w;
    write_group_setup(w, g);
    net::send_frame(sock_, MsgType::GroupSetup, w.data(), kSendTimeoutMs);
  });
}

void RemoteDevice::finish_group() {
  guarded("group setup", [&] { net::expect_frame(sock_, MsgType::GroupReady, kLoadTimeoutMs); });
}

void RemoteDevice::load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) {
  guarded("load", [&] {
    // Every distinct slice becomes one tensor "s<i>"; 2-D slices are cut here (so only their bytes
    // travel) and become Whole, 1-D ones (norms, biases) are small and keep their element range.
    parallel::DeviceGraph g = graph;
    std::vector<SliceTensor> tensors;
    std::map<std::tuple<std::string, Kind, int64_t, int64_t>, std::string> seen;
    auto rewrite = [&](parallel::WeightSlice& s) {
      if (s.kind == Kind::None) return;
      const auto& info = weights.tensor(s.tensor);
      const bool matrix = info.shape.size() >= 2 && info.n_elements() != info.shape[0];
      const bool empty = matrix && s.kind != Kind::Whole && s.range.empty();
      const Kind k = matrix ? s.kind : Kind::Whole;
      const auto key = std::make_tuple(s.tensor, k, k == Kind::Whole ? 0 : s.range.begin, k == Kind::Whole ? 0 : s.range.end);
      auto [it, fresh] = seen.emplace(key, "s" + std::to_string(tensors.size()));
      if (fresh) tensors.push_back({it->second, &info, k, s.range, empty});
      s.tensor = it->second;
      if (matrix && !empty) s.kind = Kind::Whole;
      if (empty) s.range = {0, 0};  // its begin indexed the original tensor
    };
    for (auto& n : g.nodes) {
      rewrite(n.weight);
      rewrite(n.bias);
    }
    net::ByteWriter w;
    write_graph(w, g);
    write_load_options(w, opt);
    w.u32(static_cast<uint32_t>(tensors.size()));
    net::send_frame(sock_, MsgType::Load, w.data(), kSendTimeoutMs);

    std::vector<uint8_t> chunk;
    auto flush = [&] {
      if (chunk.empty()) return;
      net::send_frame(sock_, MsgType::TensorChunk, chunk, kSendTimeoutMs);
      chunk.clear();
    };
    for (const auto& t : tensors) {
      TensorHeader h{t.name, t.src->type, t.src->shape, 0};
      const int64_t rows = t.src->n_elements() / t.src->shape[0];
      h.shape.resize(2);
      h.shape[1] = rows;
      if (t.kind == Kind::Rows) h.shape[1] = t.range.size();
      if (t.kind == Kind::Cols) h.shape[0] = t.range.size();
      if (t.kind == Kind::Whole) h.shape = t.src->shape;
      if (t.empty && t.kind == Kind::Rows) h.shape = {t.src->shape[0], 1};
      if (t.empty && t.kind == Kind::Cols) h.shape = {block_size(h.type), rows};
      h.n_bytes = t.kind == Kind::Whole ? t.src->n_bytes : row_bytes(h.type, h.shape[0]) * h.shape[1];
      net::ByteWriter hw;
      write_tensor_header(hw, h);
      net::send_frame(sock_, MsgType::Tensor, hw.data(), kSendTimeoutMs);
      for_each_piece(t, [&](const uint8_t* p, size_t n) {
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
    net::expect_frame(sock_, MsgType::Loaded, kLoadTimeoutMs);
  });
}

void RemoteDevice::submit(Step step) {
  guarded("step", [&] {
    if (in_step_) fail("net", "submit while a step is running");
    net::ByteWriter w;
    write_step(w, step);
    net::send_frame(sock_, MsgType::Step, w.data(), kSendTimeoutMs);
    in_step_ = true;
  });
}

StepResult RemoteDevice::wait() {
  return guarded("step", [&] {
    if (!in_step_) fail("net", "wait without a step");
    in_step_ = false;
    net::Frame f = net::expect_frame(sock_, MsgType::StepResult, kStepTimeoutMs, kStepTimeoutMs);
    net::ByteReader r(f.payload);
    return read_step_result(r, stats_);
  });
}

void RemoteDevice::truncate_cache(int32_t pos) {
  guarded("truncate", [&] {
    net::ByteWriter w;
    w.i32(pos);
    net::send_frame(sock_, MsgType::Truncate, w.data(), kSendTimeoutMs);
    net::expect_frame(sock_, MsgType::Truncated, kStepTimeoutMs);
  });
}

}  // namespace weft::device::remote
