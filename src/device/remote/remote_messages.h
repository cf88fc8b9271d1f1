// The session messages between a coordinator and a worker, encoded field by field (net/wire.h).
// Each family's writer and reader sit together in remote_messages.cpp; every count is checked
// against the limits below before anything is allocated.
#pragma once

#include "device/device.h"
#include "net/wire.h"
#include "parallel/group.h"

#include <array>
#include <bitset>
#include <string>
#include <string_view>

namespace weft::device::remote {

inline constexpr size_t kMaxNodes = 1 << 16;
inline constexpr size_t kMaxNameBytes = 512;
inline constexpr size_t kMaxTokens = 1 << 20;
inline constexpr size_t kMaxFloats = 64u << 20;  // 256 MiB of f32: the frame limit of a step
inline constexpr size_t kMaxTensors = 1 << 16;
inline constexpr size_t kMaxSeqs = 1024;         // sequence slots of a batched step
inline constexpr size_t kMaxCheckpoints = 1024;  // recurrent state slots besides the sequences' (LoadOptions)
inline constexpr size_t kMaxOps = 256;           // LocalOps a DeviceInfo lists (a u8 on the wire elsewhere)
inline constexpr size_t kMaxTypeIds = 256;       // GGUF type ids a DeviceInfo may name (ggml's are under 64)
inline constexpr int32_t kMaxServedThreads = 1 << 16;

// Liveness: while a worker works on a request (load, step, group setup) it sends a
// Heartbeat frame every kHeartbeatIntervalMs, from a thread of its own (so a load that hashes,
// receives and copies GiBs for minutes still beats, and a stopped process does not); a
// coordinator waiting for a reply (or streaming weights) that hears nothing for kPeerSilenceMs
// declares the worker dead. A killed worker process is seen at once (its kernel
// resets the connection); this bounds the case where no reset ever comes: the worker's host lost
// power or its network, or the process is stopped. 4 s of silence = 8 missed heartbeats, enough
// slack for a loaded host's scheduler.
inline constexpr int kHeartbeatIntervalMs = 500;
inline constexpr int kPeerSilenceMs = 4000;

// Where a worker's weights come from for one session (its reply to Load).
enum class LoadSource : uint8_t { Stream, ModelDir, Cache, Count };
std::string_view load_source_name(LoadSource s);

// Tells a worker which rank of the tensor-parallel group it is and where to rendezvous.
struct GroupSetup {
  std::string store;   // HOST:PORT of the coordinator's rendezvous store
  std::string prefix;  // group keys
  int32_t rank = 0, size = 1;
  parallel::WireType wire = parallel::WireType::F32;
  int32_t timeout_ms = 30000;
  bool host_shm = true;  // see parallel::GlooOptions::host_shm
};

// Header of one weight slice the coordinator streams. The Tensor frame carries every slice's
// header; TensorChunk frames then carry their bytes back to back, in that order.
struct TensorHeader {
  std::string name;  // the name the worker's graph uses for it (already rewritten)
  DType type = DType::F32;
  std::vector<int64_t> shape;  // ggml order
  uint64_t n_bytes = 0;
};

// The device a worker serves, as its DeviceInfo frame tells the coordinator (protocol 9.2), so
// that the planner and the load checks see a remote GPU as the GPU it is.
struct ServedDevice {
  std::string name;  // the worker's name for it: "vk:0", "cpu:8" (printable ASCII)
  int32_t threads = 1;
  DeviceMemory memory;
  // Per LocalOp, bit t set: it runs the op on weights of GGUF type id t. An op without weights has
  // every type the worker knows set (Device::supports ignores the type there).
  std::array<std::bitset<kMaxTypeIds>, static_cast<size_t>(parallel::LocalOp::Count)> weight_types;

  static ServedDevice of(const Device& d);  // asks d
  bool supports(parallel::LocalOp op, DType t) const;
  // The kind part of the name ("vk" of "vk:0").
  std::string_view kind() const { return std::string_view(name).substr(0, name.find(':')); }
};

void write_group_setup(net::ByteWriter& w, const GroupSetup& g);
GroupSetup read_group_setup(net::ByteReader& r);

void write_graph(net::ByteWriter& w, const parallel::DeviceGraph& g);
parallel::DeviceGraph read_graph(net::ByteReader& r);

void write_load_options(net::ByteWriter& w, const LoadOptions& o);
LoadOptions read_load_options(net::ByteReader& r);

void write_tensor_header(net::ByteWriter& w, const TensorHeader& t);
// Also checks that n_bytes is what the shape and type need.
TensorHeader read_tensor_header(net::ByteReader& r);
void write_tensor_headers(net::ByteWriter& w, const std::vector<TensorHeader>& ts);
std::vector<TensorHeader> read_tensor_headers(net::ByteReader& r);

// Ops this build does not know (a newer worker's) are skipped; ops it lists fewer of run nothing.
// Every count, the name and the memory are checked (free <= total) before anything is allocated.
void write_served_device(net::ByteWriter& w, const ServedDevice& d);
ServedDevice read_served_device(net::ByteReader& r);

void write_step(net::ByteWriter& w, const Step& s);
Step read_step(net::ByteReader& r);

void write_step_result(net::ByteWriter& w, const StepResult& s, const DeviceStats& stats);
StepResult read_step_result(net::ByteReader& r, DeviceStats& stats);

}  // namespace weft::device::remote
