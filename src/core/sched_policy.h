// The kernel scheduling policy of this process's threads.
#pragma once

#include <string>

namespace weft {

// Batch (SCHED_BATCH) is for a process that serves compute on request, as `weft worker` does: a
// message that wakes one of its threads then does not preempt the thread that sent it. On a host
// where the coordinator shares cores with its workers, a worker woken by the step sent to it
// would otherwise take the coordinator's core before the step reached the next worker, which
// then starts late and the first one waits for it in the first all-reduce.
enum class SchedPolicy { Normal, Batch };

SchedPolicy parse_sched_policy(const std::string& text);  // "normal" | "batch"; throws weft::Error("cli")

// Sets the calling thread's policy (threads it starts afterwards inherit it); throws weft::Error.
void set_sched_policy(SchedPolicy policy);

// The calling thread's policy (Normal for any policy other than SCHED_BATCH).
SchedPolicy current_sched_policy();

}  // namespace weft
