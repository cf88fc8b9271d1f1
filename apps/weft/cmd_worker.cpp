// weft worker: serve one device of a tensor-parallel group to a coordinator (`weft run --devices
// tcp://HOST:PORT,...` or `--rpc HOST:PORT,...`). Sessions run one at a time; the worker keeps
// serving after each ends, whether the coordinator said goodbye or died.
#include "apps/weft/commands.h"
#include "core/error.h"
#include "core/sched_policy.h"
#include "device/device_spec.h"
#include "device/remote/model_store.h"
#include "device/remote/worker_server.h"
#include "kernels/cpu_features.h"
#include "net/discovery.h"
#include "net/handshake.h"

#include <unistd.h>

#include <cstdio>
#include <memory>

namespace weft::cli {

namespace {

// Announces on the interface the worker listens on (every interface for a wildcard address).
std::unique_ptr<net::Announcer> start_announcer(const std::string& discover_addr,
                                                const device::remote::WorkerOptions& o, uint16_t port) {
  net::Announcement self;
  char host[256] = {};
  self.name = ::gethostname(host, sizeof(host) - 1) == 0 && host[0] ? host : "weft-worker";
  self.port = port;
  self.threads = static_cast<uint32_t>(o.threads);
  // Its NUMA node's, if bound; at most --memory-limit.
  self.memory_bytes =
      device::remote::served_memory(o, device::spec_memory(device::remote::served_device(o))).free_bytes;
  net::DiscoveryOptions d;
  d.address = net::parse_host_port(discover_addr);
  if (o.listen.host != "0.0.0.0") d.interface = o.listen.host == "localhost" ? "127.0.0.1" : o.listen.host;
  auto announcer = std::make_unique<net::Announcer>(d, self, net::is_loopback(o.listen.host));
  std::fprintf(stderr, "weft worker: announcing %s:%u on %s\n", self.name.c_str(), port, discover_addr.c_str());
  return announcer;
}

}  // namespace

Action add_worker(CLI::App& app) {
  struct Args {
    std::string listen = "127.0.0.1:7070";
    int threads = 1;
    std::string devices;
    std::string key_file;
    std::string model_dir;
    std::string cache_dir = device::remote::default_cache_dir();
    uint64_t cache_max_bytes = device::remote::kDefaultCacheMaxBytes;
    bool no_cache = false;
    uint64_t memory_limit = 0;
    std::string net_poll = "auto";
    std::string sched = "batch";
    int preload_timeout_s = 60;
    int load_delay_ms = 0;
    bool announce = false;
    std::string discover_addr = net::kDefaultDiscoveryAddress;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("worker", "serve a device to a coordinator over TCP");
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any free port)")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "compute threads")->capture_default_str();
  cmd->add_option("--devices", a->devices,
                  "the device to serve, any local kind (cpu:THREADS[@NUMA]); default cpu:<-t>");
  cmd->add_option("--auth-key-file", a->key_file,
                  "shared key (>= 16 bytes, in a file only its owner can read: chmod 600) the coordinator must "
                  "prove; required beyond loopback. The coordinator takes the same file (--auth-key-file or "
                  "$WEFT_AUTH_KEY_FILE)");
  cmd->add_option("--model-dir", a->model_dir,
                  "directory with a copy of the coordinator's GGUF (matched by size and SHA-256): slices are read "
                  "from it instead of streamed");
  cmd->add_option("--cache-dir", a->cache_dir, "where streamed weight shards are kept by content hash")
      ->capture_default_str();
  cmd->add_option("--cache-max-bytes", a->cache_max_bytes,
                  "largest total size of the cached shards, in bytes (suffixes K, M, G: powers of 1024); the least "
                  "recently used shards are removed to make room")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_flag("--no-cache", a->no_cache, "do not cache streamed shards");
  cmd->add_option("--memory-limit", a->memory_limit,
                  "at most this many bytes of weights and KV cache on the served device (suffixes K, M, G: powers of "
                  "1024): coordinators give it a smaller share to fit, and a load past it is refused; default: the "
                  "device's own memory")
      ->transform(CLI::AsSizeValue(false));
  // Hidden (no group): tests stop a worker while it is busy loading.
  cmd->add_option("--test-load-delay-ms", a->load_delay_ms)->group("")->check(CLI::Range(0, 600000));
  cmd->add_option("--net-poll", a->net_poll, "waiting in all-reduces: auto | busy (poll 50 us, then sleep) | block")
      ->check(CLI::IsMember({"auto", "busy", "block"}))
      ->capture_default_str();
  cmd->add_option("--sched", a->sched,
                  "scheduling policy of the worker's threads: batch (SCHED_BATCH: woken by a message, a thread does "
                  "not preempt its sender, e.g. a coordinator on the same cores sending the next worker its step) | "
                  "normal")
      ->check(CLI::IsMember({"batch", "normal"}))
      ->capture_default_str();
  cmd->add_option("--preload-timeout", a->preload_timeout_s,
                  "seconds a coordinator may hold the worker between its handshake and its load")
      ->check(CLI::Range(1, 24 * 3600))
      ->capture_default_str();
  cmd->add_flag("--announce", a->announce,
                "announce this worker on the local segment (UDP; never the key) so that coordinators find it with "
                "--devices auto");
  cmd->add_option("--discover-addr", a->discover_addr,
                  "where announcements go: a multicast group or a broadcast address, with the port")
      ->capture_default_str();
  return [a] {
    try {  // before any thread starts: they inherit it
      set_sched_policy(parse_sched_policy(a->sched));
    } catch (const Error& e) {  // e.g. a sandbox that forbids it: serve anyway, as before
      std::fprintf(stderr, "weft worker: warning: %s; threads keep the default policy\n", e.what());
    }
    device::remote::WorkerOptions o;
    o.listen = net::parse_host_port(a->listen);
    o.threads = a->threads;
    if (!a->devices.empty()) device::remote::serve_device(o, a->devices);
    if (!a->key_file.empty()) o.key = net::read_key_file(a->key_file);
    o.model_dir = a->model_dir;
    o.cache_dir = a->no_cache ? "" : a->cache_dir;
    o.cache_max_bytes = a->cache_max_bytes;
    o.net_poll = parallel::parse_net_poll(a->net_poll);
    o.preload_timeout_ms = a->preload_timeout_s * 1000;
    o.load_delay_ms = a->load_delay_ms;
    o.memory_limit_bytes = a->memory_limit;
    device::remote::check_listen(o);
    device::remote::WorkerServer server(o);
    // Tests and scripts read the port from this line (with --listen HOST:0).
    std::printf("weft worker listening on %s:%u\n", o.listen.host.c_str(), server.port());
    std::fprintf(stderr, "weft worker: serves %s; kernels %s\n",
                 device::describe(device::remote::served_device(o)).c_str(), kernels::kernel_summary().c_str());
    std::fflush(stdout);
    std::unique_ptr<net::Announcer> announcer;
    if (a->announce) announcer = start_announcer(a->discover_addr, o, server.port());
    server.serve();
    return 0;
  };
}

}  // namespace weft::cli
