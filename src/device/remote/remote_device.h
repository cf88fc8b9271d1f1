// A device in another process (`weft worker`), reached over TCP. It runs the same per-device graph
// as a CPU device: load streams exactly the weight slices the graph names, and each step sends only
// tokens, positions and sampling parameters; the reply is the device's candidates (or logits slice).
// In a tensor split its collectives run on the worker, over Gloo (see process_group.h).
#pragma once

#include "device/device.h"
#include "device/remote/remote_messages.h"
#include "net/socket.h"

#include <string>
#include <vector>

namespace weft::device::remote {

inline constexpr int kConnectTimeoutMs = 5000;
inline constexpr int kLoadTimeoutMs = 600 * 1000;  // the worker parses and repacks every slice
inline constexpr int kStepTimeoutMs = 600 * 1000;  // a long prompt on a slow worker; a dead one fails at once

class RemoteDevice : public Device {
 public:
  // Connects and authenticates (key empty: none). Throws weft::Error naming tcp://address.
  RemoteDevice(const std::string& address, int threads, const std::vector<uint8_t>& key);
  ~RemoteDevice() override;

  std::string name() const override { return "tcp://" + address_; }
  bool supports(parallel::LocalOp op, DType t) const override;
  int threads() const override { return threads_; }
  void attach_group(std::unique_ptr<parallel::Group> group) override;
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) override;
  void submit(Step step) override;
  StepResult wait() override;
  void truncate_cache(int32_t pos) override;
  DeviceStats stats() const override { return stats_; }

  // Tensor split across processes: asks the worker to join the group (returns at once) ...
  void start_group(const GroupSetup& g);
  // ... and waits until it has.
  void finish_group();
  // The local address that reaches this worker (for the rendezvous store and local ranks).
  std::string local_host() const { return sock_.local_host(); }

 private:
  // Runs f; a failure is rethrown naming this device, and the connection is closed.
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f());

  std::string address_;
  int threads_;
  net::Socket sock_;
  bool in_step_ = false;
  DeviceStats stats_;
};

// The shared key for workers: the file named by $WEFT_AUTH_KEY_FILE, or empty when unset.
std::vector<uint8_t> coordinator_key();

}  // namespace weft::device::remote
