// A CPU device: a set of cores (optionally one NUMA node) running its per-device graph with its own
// persistent thread pool. Several CPU devices in one process form a tensor-parallel group over
// shared-memory collectives.
#pragma once

#include "core/thread_pool.h"
#include "device/device.h"
#include "device/group_member.h"
#include "device/job_thread.h"

#include <exception>
#include <thread>

namespace weft::device {

struct CpuDeviceOptions {
  int index = 0;  // "cpu:<index>" in messages
  int n_threads = 1;
  Placement placement;         // cores to pin to, NUMA node
  bool spin = true;            // see ThreadPool: only when every thread in the process has a core
  bool map_weights = false;    // see WeightStore: zero copy from the GGUF mapping, not on huge pages
  bool repack_mapped = false;  // see WeightStore
};

class CpuGraphRunner;

// Whether this build's CPU kernels run `op` on weights of type t; shared by every device kind
// that computes with them (CpuDevice, and RemoteDevice, whose worker runs a CpuDevice).
bool cpu_kernels_support(parallel::LocalOp op, DType t);

class CpuDevice : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions opt);
  ~CpuDevice() override;

  std::string name() const override;
  bool supports(parallel::LocalOp op, DType t) const override;
  int threads() const override { return opt_.n_threads; }
  Reach reach() const override { return {true, "", "cpu"}; }
  void begin_join(GroupJoin join) override;
  void finish_join() override;
  // What the group's all-reduces travel over (parallel::Group::transport), "" before a join.
  std::string_view group_transport() const override { return member_.transport(); }
  void load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) override;
  void submit(Step step) override;
  bool poll(int timeout_ms) override;
  StepResult wait() override;
  void abort() override;
  DeviceStats stats() const override;
  DeviceMemory memory() const override;

 private:
  [[noreturn]] void rethrow_named(std::exception_ptr e) const;  // a weft::Error gets this device's name

  CpuDeviceOptions opt_;
  GroupMember member_;
  std::unique_ptr<CpuGraphRunner> runner_;
  Step step_;
  StepResult result_;
  // All work runs on the device's own thread (thread 0 of its pool), pinned to its cores. Last:
  // stopped first, releasing the runner (its pool's workers) on the thread that owns them.
  JobThread thread_;
};

}  // namespace weft::device
