// Flags shared by the commands that load a model onto devices (run, bench, plan).
#pragma once

#include "runtime/engine.h"

#include <CLI/CLI.hpp>

#include <string>

namespace weft::cli {

struct ModelOptions {
  std::string model;
  int threads = 0;                            // -t: threads of the single default device (0: all cores)
  std::string devices;                        // --devices cpu:1,cpu:1
  std::string split_mode;                     // -sm none|layer|tensor ("" : tensor with several devices)
  std::string tensor_split;                   // -ts 3,1 | auto
  bool rebalance = false;                     // --rebalance
  runtime::RebalancePolicy rebalance_policy;  // its hidden knobs (tests): window, lag, min change
  std::string moe_split = "auto";             // --moe-split auto|tensor|expert
  int ctx = 0;                                // -c
  int batch = 512;                            // -b
  std::string wire = "f32";                   // --wire f32|bf16|f16
  bool exact = false;                         // --exact
  int ctx_checkpoints = 4;                    // --ctx-checkpoints (-ctxcp): recurrent states kept per slot
  std::string rpc;  // --rpc HOST:PORT,... : workers appended after --devices (llama.cpp's flag)
  // --devices auto / --rpc auto: the workers that answer on the local segment (net/discovery.h)
  int discover_timeout_ms = 1000;  // --discover-timeout
  std::string discover_addr;       // --discover-addr GROUP:PORT (default net::kDefaultDiscoveryAddress)
  std::string discover_iface;      // --discover-iface ADDR: the one interface to query on ("" : all)
  bool rejoin = false;             // --rejoin: lost workers that answer again rejoin at each re-plan
  std::string auth_key_file;       // --auth-key-file (else $WEFT_AUTH_KEY_FILE)
  std::string net_poll = "auto";   // --net-poll auto|busy|block, for this process's Gloo ranks
  std::string net_shm = "on";      // --net-shm on|off
  bool mmap = false;               // --mmap: CPU devices read weights from the file mapping
  std::string cache_type_k = "f16", cache_type_v = "f16";  // -ctk / -ctv
  std::string on_device_loss = "replan";                   // --on-device-loss replan|fail
  // llama.cpp's device flags, accepted so its command lines run; notes() says what each means here.
  std::string n_gpu_layers;           // -ngl N | auto | all
  std::string main_gpu;               // -mg INDEX
  std::string flash_attn = "absent";  // -fa [on|off|auto] ("" when given without a value)
  bool mlock = false;                 // --mlock: lock this process's memory once the model is loaded
  bool quiet = false;                 // engine_options() prints notes() on stderr unless set

  void add_to(CLI::App& cmd, bool with_ctx = true);
  // Also hands the network flags to the remote devices (device::remote::set_coordinator_config),
  // and prints notes().
  runtime::EngineOptions engine_options() const;
  std::vector<device::DeviceSpec> discovered_workers() const;
  // One line for each llama.cpp flag given that does not apply to weft, saying so.
  std::vector<std::string> notes() const;
  // --mlock, once the engine has loaded: mlockall of what this process holds (its CPU devices'
  // weights); a warning naming RLIMIT_MEMLOCK when the system refuses.
  void lock_memory() const;
};

// "3,1" -> {3, 1}; throws weft::Error("cli") on malformed lists.
std::vector<double> parse_ratios(const std::string& s);

}  // namespace weft::cli
