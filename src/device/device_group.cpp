#include "device/device_group.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/remote/remote_device.h"
#include "net/handshake.h"
#include "net/kv_store.h"
#include "parallel/gloo_group.h"
#include "parallel/memory_fit.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace weft::device {
namespace {

// Among failures of one operation over several devices: the first one that is a device's own.
void rethrow_cause(const std::vector<std::exception_ptr>& errors) {
  std::exception_ptr echo;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (err.blame() == Blame::Own) throw;
      if (!echo) echo = e;
    } catch (...) {
      throw;
    }
  }
  if (echo) std::rethrow_exception(echo);
}

// A group name no other group of any process shares: fresh random bytes also keep store entries
// of an earlier group from being replayed into this one.
std::string unique_prefix() {
  static std::atomic<int> groups{0};
  std::string nonce;
  for (uint8_t b : net::random_bytes(8)) nonce += fmt::format("{:02x}", b);
  return "weft/" + std::to_string(::getpid()) + "/" + std::to_string(groups++) + "/" + nonce;
}

}  // namespace

GroupChoice choose_group(std::span<const Reach> reaches, std::span<const int> threads) {
  WEFT_ASSERT(reaches.size() == threads.size());
  GroupChoice c;
  for (size_t i = 0; i < reaches.size(); ++i) {
    if (reaches[i].in_process)
      c.local_threads += threads[i];
    else if (c.host.empty())
      c.host = reaches[i].local_host;
  }
  // Kinds do not decide anything yet: every kind computing here reads and writes its collectives'
  // buffers in host memory, and a worker's device all-reduces on its worker's side of Gloo.
  c.backend = std::all_of(reaches.begin(), reaches.end(), [](const Reach& r) { return r.in_process; })
                  ? GroupBackend::SharedMemory
                  : GroupBackend::Network;
  return c;
}

namespace {

// Every device in this process: handles of one in-process group, joined in turn.
void join_shared(const Devices& devices, parallel::WireType wire, const GroupChoice& c) {
  const int n = static_cast<int>(devices.size());
  auto shared = parallel::make_shm_group(n, wire, /*spin=*/c.local_threads <= hardware_cores());
  for (int i = 0; i < n; ++i) {
    devices[i]->begin_join({i, n, wire, std::move(shared[i]), {}});
    devices[i]->finish_join();
  }
}

// Every rank joins one network group through the rendezvous store this process serves meanwhile.
void join_network(const Devices& devices, parallel::WireType wire, int timeout_ms, const GroupChoice& c) {
  const int n = static_cast<int>(devices.size());
  net::KvServer store(c.host);  // serves while the ranks connect, then goes
  const auto& config = remote::coordinator_config();
  const std::vector<uint8_t> key = remote::coordinator_key();
  NetworkGroup g;
  g.store = c.host + ":" + std::to_string(store.port());
  g.prefix = unique_prefix();
  if (!key.empty()) g.store_key = net::rendezvous_key(key, g.prefix);
  g.host = c.host;
  g.busy_poll = parallel::resolve_busy_poll(config.net_poll, c.local_threads);
  g.timeout_ms = timeout_ms;
  g.host_shm = config.host_shm;
  for (int i = 0; i < n; ++i) devices[i]->begin_join({i, n, wire, nullptr, g});
  // Every rank is connecting now; wait for all, even after a failure (none is left connecting).
  std::vector<std::exception_ptr> errors(n);
  for (int i = 0; i < n; ++i) {
    try {
      devices[i]->finish_join();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  rethrow_cause(errors);
}

}  // namespace

void connect_group(const Devices& devices, parallel::WireType wire, int timeout_ms) {
  std::vector<Reach> reaches;
  std::vector<int> threads;
  for (const auto& d : devices) {
    reaches.push_back(d->reach());
    threads.push_back(d->threads());
  }
  const GroupChoice choice = choose_group(reaches, threads);
  switch (choice.backend) {
    case GroupBackend::SharedMemory: return join_shared(devices, wire, choice);
    case GroupBackend::Network: return join_network(devices, wire, timeout_ms, choice);
  }
}

void load_devices(const Devices& devices, const std::vector<parallel::DeviceGraph>& graphs, const gguf::File& weights,
                  const LoadOptions& opt) {
  WEFT_ASSERT(graphs.size() == devices.size());
  // Refused before any load starts, rather than failing (or worse) half way through.
  constexpr double kMiB = 1024.0 * 1024;
  const parallel::KvSizing kv = kv_sizing(opt);
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceMemory m = devices[i]->memory();
    const uint64_t need = parallel::device_bytes(graphs[i], kv);
    if (m.known() && m.hard_limit && need > m.free_bytes)
      fail_on("device", devices[i]->name(),
              "the plan gives it {:.1f} MiB of weights and KV cache ({:.1f} MiB of weights) but it has {:.1f} MiB "
              "free (of {:.1f} MiB): lower its -ts share, -c or -np, or add devices",
              need / kMiB, graphs[i].weight_bytes / kMiB, m.free_bytes / kMiB, m.total_bytes / kMiB);
  }
  std::vector<std::exception_ptr> errors(devices.size());
  auto load = [&](size_t i) {
    try {
      devices[i]->load(graphs[i], weights, opt);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  // Asked before any load starts: a failing load closes its device's connection meanwhile.
  std::vector<bool> in_process;
  for (const auto& d : devices) in_process.push_back(d->reach().in_process);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < devices.size(); ++i)
    if (!in_process[i]) threads.emplace_back(load, i);
  for (size_t i = 0; i < devices.size(); ++i)
    if (in_process[i]) load(i);
  for (auto& t : threads) t.join();
  rethrow_cause(errors);
}

}  // namespace weft::device
