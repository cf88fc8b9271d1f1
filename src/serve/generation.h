// The generating endpoints' common part: submits a request's prompts as scheduler jobs, then
// replies with the whole result, or streams it as server-sent events. The HTTP status is decided
// only once every job has produced its first token (or failed), so a request that fails before
// that (a device died) gets a plain error status; a client that leaves cancels its jobs.
#pragma once

#include "core/token.h"
#include "runtime/scheduler.h"
#include "serve/reply.h"
#include "serve/request.h"

#include <httplib.h>

#include <atomic>
#include <string>
#include <vector>

namespace weft::serve {

struct GenerationContext {
  runtime::Scheduler& scheduler;
  std::string model_name;
  const std::atomic<bool>& stopping;  // the server is stopping: end at once
};

void serve_generation(const GenerationContext& ctx, Endpoint kind, const std::vector<std::vector<Token>>& prompts,
                      const GenerationParams& gen, const httplib::Request& req, httplib::Response& res);

}  // namespace weft::serve
