// Collectives between processes (and hosts) on Gloo's TCP transport. Every rank of a group that
// spans processes uses one — the coordinator's in-process CPU devices included — connected through
// a rendezvous store (net::KvServer) that the coordinator runs for the duration of the connect.
#pragma once

#include "parallel/group.h"

#include <chrono>
#include <memory>
#include <string>

namespace weft::parallel {

struct GlooOptions {
  std::string store;     // HOST:PORT of the coordinator's rendezvous store
  std::string prefix;    // keys of this group (one store may serve several groups)
  std::string hostname;  // address the other ranks reach this rank at
  int timeout_ms = 30000;  // connect and each collective: a dead or stuck peer becomes an error
};

// Connects rank `rank` of `size` (blocks until every rank has joined, or the timeout).
// Only WireType::F32 is supported on this backend; others throw weft::Error("gloo", ...).
std::unique_ptr<Group> make_gloo_group(int rank, int size, WireType wire, const GlooOptions& opt);

}  // namespace weft::parallel
