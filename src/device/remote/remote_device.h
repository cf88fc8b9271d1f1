// A device in another process (`weft worker`), reached over TCP. It runs the same per-device graph
// as a CPU device: load names the weight slices the graph needs (the worker reads them from its
// own copy of the model or its cache when it can, else they are streamed), and each step sends only
// tokens, positions and sampling parameters; the reply is the device's candidates (or logits slice).
// In a tensor split its collectives run on the worker, over Gloo (see device_group.h). With a key,
// every frame of the session carries a MAC under keys derived from the handshake (net/channel.h).
// A 9.2 worker says at once which device it serves (DeviceInfo: its weight types and memory), so
// supports() and memory() are that device's; an older worker's is taken for a CPU of unknown memory.
//
// Every wait is bounded: a worker that resets or closes the connection fails the current call at
// once; one that goes silent (no reply and no heartbeat) fails it after kPeerSilenceMs; and while
// waiting for one worker the coordinator also watches the other workers of its group, so a dead
// peer is named even while this worker is still (heartbeating) stuck in a collective with it.
#pragma once

#include "device/device.h"
#include "device/remote/remote_messages.h"
#include "device/remote/weight_slices.h"
#include "net/channel.h"
#include "net/frame.h"
#include "parallel/gloo_group.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace weft::device::remote {

inline constexpr int kConnectTimeoutMs = 5000;

// Coordinator-wide settings from the command line (run/bench/plan flags).
struct CoordinatorConfig {
  std::string key_file;                                  // --auth-key-file; empty: $WEFT_AUTH_KEY_FILE, else no key
  parallel::NetPoll net_poll = parallel::NetPoll::Auto;  // for the coordinator's own Gloo ranks
  bool progress = true;                                  // weight streaming progress on stderr
  bool host_shm = true;  // --net-shm: a group whose ranks share one host all-reduces through shared memory
};
void set_coordinator_config(const CoordinatorConfig& c);
const CoordinatorConfig& coordinator_config();
// The shared key for workers: --auth-key-file, else the file named by $WEFT_AUTH_KEY_FILE, else empty.
std::vector<uint8_t> coordinator_key();

// What a load did, for reports and tests.
struct LoadReport {
  LoadSource source = LoadSource::Stream;
  uint64_t bytes_streamed = 0;  // weight bytes sent (0 when the worker had them)
  double seconds = 0;
};

class RemoteDevice;
// The remote devices of one group, so that a wait on one can watch the others. Members join in
// begin_join (one watch per group, found by its store prefix) and load concurrently (one thread
// each), so the first failure is kept under a mutex.
class GroupWatch {
 public:
  std::vector<RemoteDevice*> members;
  // Records e unless a member failed before.
  void set_failed(const Error& e);
  // The first member's error, if one failed.
  std::optional<Error> failed() const;

 private:
  mutable std::mutex mu_;
  std::optional<Error> failed_;
};

class RemoteDevice : public Device {
 public:
  // Connects, authenticates (key empty: none) and reads the worker's DeviceInfo where its protocol
  // has one. Throws weft::Error naming tcp://address.
  RemoteDevice(const std::string& address, int threads, const std::vector<uint8_t>& key);
  ~RemoteDevice() override;

  std::string name() const override { return "tcp://" + address_; }
  bool supports(parallel::LocalOp op, DType t) const override;
  int threads() const override { return threads_; }
  Reach reach() const override {
    return {false, ch_.socket().local_host(), served_ ? std::string(served_->kind()) : std::string()};
  }
  // Asks the worker to join the network group (a remote device cannot share memory).
  void begin_join(GroupJoin join) override;
  void finish_join() override;
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) override;
  void submit(Step step) override;
  bool poll(int timeout_ms) override;
  StepResult wait() override;
  void abort() override;
  DeviceStats stats() const override { return stats_; }
  // The worker's device's; unknown from a worker older than protocol 9.2.
  DeviceMemory memory() const override { return served_ ? served_->memory : DeviceMemory{}; }

  const LoadReport& load_report() const { return load_report_; }
  // The device the worker serves, as it said (nullopt: a worker older than protocol 9.2).
  const std::optional<ServedDevice>& served() const { return served_; }

 private:
  using Clock = std::chrono::steady_clock;
  // Runs f; a failure is rethrown naming this device, and the connection is closed.
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f());
  void send(net::MsgType t, std::span<const uint8_t> payload);
  // The reply to the last request, skipping heartbeats; bounded as the header comment says.
  net::Frame await(net::MsgType want);
  // Throws when another member of the group has failed or is found dead (see probe).
  void check_peers();
  // Without blocking: consumes the heartbeats that have arrived and says whether a reply is
  // waiting; throws when the connection is gone or the worker has been silent for kPeerSilenceMs.
  bool probe();
  // Throws when nothing has been heard from the worker for kPeerSilenceMs.
  void check_silence() const;
  void stream_weights(const gguf::File& weights, const std::vector<SliceSpec>& specs);

  std::string address_;
  int threads_;
  std::vector<uint8_t> key_;
  net::Channel ch_;                   // every frame of the session goes through it (MACed with a key)
  std::atomic<bool> in_step_{false};  // read by check_peers of the group's other members
  Clock::time_point last_heard_ = Clock::now();
  DeviceStats stats_;
  double round_trip_seconds_ = 0;  // kept here: each reply's stats overwrite stats_
  std::chrono::steady_clock::time_point submitted_;
  LoadReport load_report_;
  std::optional<ServedDevice> served_;
  std::shared_ptr<GroupWatch> watch_;
};

}  // namespace weft::device::remote
