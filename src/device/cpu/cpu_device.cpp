#include "device/cpu/cpu_device.h"

#include "core/error.h"
#include "device/cpu/cpu_graph_runner.h"
#include "device/cpu/cpu_kind.h"
#include "kernels/quants.h"

#include <fmt/format.h>

#include <utility>

namespace weft::device {

CpuDevice::CpuDevice(CpuDeviceOptions opt) : opt_(std::move(opt)), thread_([this] { runner_.reset(); }) {}

CpuDevice::~CpuDevice() = default;

std::string CpuDevice::name() const { return fmt::format("cpu:{}", opt_.index); }

bool CpuDevice::supports(parallel::LocalOp op, DType t) const { return cpu_kernels_support(op, t); }

bool cpu_kernels_support(parallel::LocalOp op, DType t) {
  using parallel::LocalOp;
  const bool reads_matrix = op == LocalOp::MatMul || op == LocalOp::Embed || op == LocalOp::ExpertMatMul ||
                            op == LocalOp::ExpertMatMulSum || op == LocalOp::HeadMatMul;
  if (!reads_matrix) return op < LocalOp::Count;
  try {
    kernels::kernels_for(t);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void CpuDevice::begin_join(GroupJoin j) { member_.begin(std::move(j)); }

void CpuDevice::finish_join() {
  if (auto e = member_.finish()) rethrow_named(e);
}

void CpuDevice::load(const parallel::DeviceGraph& graph, const gguf::File& weights, const LoadOptions& opt) {
  if (auto e = thread_.call([&] {
        runner_ = std::make_unique<CpuGraphRunner>(opt_.n_threads, opt_.placement, opt_.spin, opt_.map_weights,
                                                   opt_.repack_mapped, member_.group());
        runner_->load(graph, weights, opt);
      }))
    rethrow_named(e);
}

void CpuDevice::submit(Step step) {
  if (!runner_) fail("cpu", "{}: submit before load", name());
  if (!thread_.poll(0)) fail("cpu", "{}: submit while a step is running", name());
  step_ = std::move(step);
  thread_.start([this] { result_ = runner_->run(step_); });
}

bool CpuDevice::poll(int timeout_ms) { return thread_.poll(timeout_ms); }

void CpuDevice::rethrow_named(std::exception_ptr e) const {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    throw err.on_device(name());
  }
}

void CpuDevice::abort() { member_.abort(); }

StepResult CpuDevice::wait() {
  if (auto e = thread_.wait()) rethrow_named(e);
  return std::move(result_);
}

DeviceMemory CpuDevice::memory() const { return cpu_memory(opt_.placement.numa_node); }

DeviceStats CpuDevice::stats() const { return runner_ ? runner_->stats() : DeviceStats{}; }

}  // namespace weft::device
