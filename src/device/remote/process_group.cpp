#include "device/remote/process_group.h"

#include "core/error.h"
#include "device/remote/remote_device.h"
#include "net/handshake.h"
#include "net/kv_store.h"
#include "parallel/gloo_group.h"

#include <atomic>
#include <exception>
#include <thread>
#include <unistd.h>

namespace weft::device::remote {

bool attach_process_group(const std::vector<std::unique_ptr<Device>>& devices, parallel::WireType wire,
                          int timeout_ms) {
  std::vector<RemoteDevice*> remote(devices.size(), nullptr);
  std::string host;
  for (size_t i = 0; i < devices.size(); ++i)
    if ((remote[i] = dynamic_cast<RemoteDevice*>(devices[i].get())) && host.empty()) host = remote[i]->local_host();
  if (host.empty()) return false;
  auto watch = std::make_shared<GroupWatch>();
  int local_threads = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (remote[i]) watch->members.push_back(remote[i]);
    else local_threads += devices[i]->threads();
  }
  for (RemoteDevice* r : watch->members) r->set_watch(watch);
  const bool busy = parallel::resolve_busy_poll(coordinator_config().net_poll, local_threads);

  // The interface that reaches the first worker serves the store and the local ranks.
  net::KvServer store(host);
  static std::atomic<int> groups{0};
  GroupSetup g;
  g.store = host + ":" + std::to_string(store.port());
  // Fresh random bytes make every group's prefix, and so its store key, unique: entries from an
  // earlier group cannot be replayed into this one.
  std::string nonce;
  for (uint8_t b : net::random_bytes(8)) nonce += fmt::format("{:02x}", b);
  g.prefix = "weft/" + std::to_string(::getpid()) + "/" + std::to_string(groups++) + "/" + nonce;
  const std::vector<uint8_t> store_key = net::rendezvous_key(watch->members.front()->key(), g.prefix);
  g.size = static_cast<int>(devices.size());
  g.wire = wire;
  g.timeout_ms = timeout_ms;
  for (size_t i = 0; i < devices.size(); ++i)
    if (remote[i]) {
      g.rank = static_cast<int>(i);
      remote[i]->start_group(g);
    }
  // Local ranks connect concurrently: the mesh forms only once every rank has joined.
  std::vector<std::unique_ptr<parallel::Group>> local(devices.size());
  std::vector<std::exception_ptr> errors(devices.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < devices.size(); ++i)
    if (!remote[i])
      threads.emplace_back([&, i] {
        try {
          local[i] = parallel::make_gloo_group(static_cast<int>(i), g.size, wire, {g.store, g.prefix, host, timeout_ms, busy, parallel::kSyncAllReduceMaxBytes, store_key});
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  std::exception_ptr first;
  for (size_t i = 0; i < devices.size(); ++i)
    if (remote[i]) {
      try {
        remote[i]->finish_group();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e && !first) first = e;
  if (first) std::rethrow_exception(first);
  for (size_t i = 0; i < devices.size(); ++i)
    if (!remote[i]) devices[i]->attach_group(std::move(local[i]));
  return true;
}

void load_devices(const std::vector<std::unique_ptr<Device>>& devices, const std::vector<parallel::DeviceGraph>& graphs,
                  const gguf::File& weights, const LoadOptions& opt) {
  WEFT_ASSERT(graphs.size() == devices.size());
  std::vector<std::exception_ptr> errors(devices.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < devices.size(); ++i)
    if (dynamic_cast<RemoteDevice*>(devices[i].get()))
      threads.emplace_back([&, i] {
        try {
          devices[i]->load(graphs[i], weights, opt);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  for (size_t i = 0; i < devices.size(); ++i)
    if (!dynamic_cast<RemoteDevice*>(devices[i].get())) {
      try {
        devices[i]->load(graphs[i], weights, opt);
      } catch (...) {
        errors[i] = std::current_exception();
        break;  // the remote loads see no failure of a local device: let them finish
      }
    }
  for (auto& t : threads) t.join();
  std::exception_ptr echo;  // "this group cannot go on": a member that stopped because another failed
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      if (std::string(err.what()).find("this group cannot go on") == std::string::npos) throw;
      if (!echo) echo = e;
    }
  }
  if (echo) std::rethrow_exception(echo);
}

}  // namespace weft::device::remote
