#include "core/error.h"
#include "parallel/gloo_group.h"

#include <sched.h>

#include <algorithm>

namespace weft::parallel {

NetPoll parse_net_poll(const std::string& text) {
  if (text == "auto") return NetPoll::Auto;
  if (text == "busy") return NetPoll::Busy;
  if (text == "block") return NetPoll::Block;
  fail("cli", "--net-poll: '{}' is not auto, busy or block", text);
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

bool resolve_busy_poll(NetPoll poll, int process_threads) {
  if (poll != NetPoll::Auto) return poll == NetPoll::Busy;
  // The polling thread is one of the compute threads (it waits between ops), so a core per
  // compute thread is a core per poller; with fewer cores, spinning would steal a peer's core.
  return process_threads <= available_cores();
}

}  // namespace weft::parallel
