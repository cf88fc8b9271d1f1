#include "core/sched_policy.h"

#include "core/error.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

namespace weft {

SchedPolicy parse_sched_policy(const std::string& text) {
  if (text == "normal") return SchedPolicy::Normal;
  if (text == "batch") return SchedPolicy::Batch;
  fail("cli", "scheduling policy '{}': normal or batch", text);
}

void set_sched_policy(SchedPolicy policy) {
  const sched_param p{};  // priority 0: the only one SCHED_OTHER and SCHED_BATCH take
  // pid 0: the calling thread (Linux schedules threads, not processes)
  if (::sched_setscheduler(0, policy == SchedPolicy::Batch ? SCHED_BATCH : SCHED_OTHER, &p) != 0)
    fail("sched", "cannot set the {} scheduling policy: {}", policy == SchedPolicy::Batch ? "batch" : "normal",
         std::strerror(errno));
}

SchedPolicy current_sched_policy() {
  return ::sched_getscheduler(0) == SCHED_BATCH ? SchedPolicy::Batch : SchedPolicy::Normal;
}

}  // namespace weft
