#include "device/cpu/cpu_device.h"

#include "core/error.h"
#include "device/cpu/cpu_graph_runner.h"
#include "device/cpu/cpu_kind.h"
#include "kernels/quants.h"
#include "parallel/gloo_group.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace weft::device {

CpuDevice::CpuDevice(CpuDeviceOptions opt) : opt_(std::move(opt)) {
  thread_ = std::thread([this] { thread_main(); });
}

CpuDevice::~CpuDevice() {
  if (joining_.joinable()) joining_.join();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string CpuDevice::name() const { return fmt::format("cpu:{}", opt_.index); }

bool CpuDevice::supports(parallel::LocalOp op, DType t) const { return cpu_kernels_support(op, t); }

bool cpu_kernels_support(parallel::LocalOp op, DType t) {
  using parallel::LocalOp;
  const bool reads_matrix =
      op == LocalOp::MatMul || op == LocalOp::Embed || op == LocalOp::ExpertMatMul || op == LocalOp::ExpertMatMulSum;
  if (!reads_matrix) return op < LocalOp::Count;
  try {
    kernels::kernels_for(t);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void CpuDevice::begin_join(GroupJoin j) {
  if (j.shared) {
    group_ = std::move(j.shared);
    return;
  }
  // A network rank: connect on a thread of its own while the other ranks connect too.
  joining_ = std::thread([this, j = std::move(j)] {
    try {
      const NetworkGroup& g = j.net;
      group_ = parallel::make_gloo_group(
          j.rank, j.size, j.wire,
          {g.store, g.prefix, g.host, g.timeout_ms, g.busy_poll, parallel::kSyncChunkBytes, g.store_key, g.host_shm});
    } catch (...) {
      join_error_ = std::current_exception();
    }
  });
}

void CpuDevice::finish_join() {
  if (joining_.joinable()) joining_.join();
  if (join_error_) rethrow_named(std::exchange(join_error_, nullptr));
}

void CpuDevice::thread_main() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !job_done_; });
    if (stop_) {
      runner_.reset();  // the pool's workers are joined on the thread that owns them
      return;
    }
    auto job = std::move(job_);
    lock.unlock();
    std::exception_ptr err;
    try {
      job();
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    error_ = err;
    job_done_ = true;
    cv_.notify_all();
  }
}

void CpuDevice::call(std::function<void()> job) {
  {
    std::unique_lock lock(mu_);
    job_ = std::move(job);
    job_done_ = false;
  }
  cv_.notify_all();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return job_done_; });
  if (error_) rethrow_named(std::exchange(error_, nullptr));
}

void CpuDevice::load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) {
  call([&] {
    runner_ = std::make_unique<CpuGraphRunner>(opt_.n_threads, opt_.placement, opt_.spin, opt_.map_weights,
                                               opt_.repack_mapped, group_.get());
    runner_->load(graph, weights, opt);
  });
}

void CpuDevice::submit(Step step) {
  if (!runner_) fail("cpu", "{}: submit before load", name());
  std::unique_lock lock(mu_);
  if (!job_done_) fail("cpu", "{}: submit while a step is running", name());
  step_ = std::move(step);
  job_ = [this] { result_ = runner_->run(step_); };
  job_done_ = false;
  cv_.notify_all();
}

bool CpuDevice::poll(int timeout_ms) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return job_done_; });
}

void CpuDevice::rethrow_named(std::exception_ptr e) const {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    throw err.on_device(name());
  }
}

void CpuDevice::abort() {
  if (group_) group_->abort();
}

StepResult CpuDevice::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return job_done_; });
  if (error_) rethrow_named(std::exchange(error_, nullptr));
  return std::move(result_);
}

DeviceMemory CpuDevice::memory() const { return cpu_memory(opt_.placement.numa_node); }

DeviceStats CpuDevice::stats() const { return runner_ ? runner_->stats() : DeviceStats{}; }

}  // namespace weft::device
