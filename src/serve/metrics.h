// GET /metrics: Prometheus text format, from prometheus-cpp's registry and text serializer.
// Counters of requests by status are kept here; the rest is read from the scheduler at scrape.
#pragma once

#include "runtime/scheduler.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace weft::serve {

class Metrics {
 public:
  Metrics();
  // A finished HTTP request (any thread).
  void count_request(int status);
  // The exposition; stats: the scheduler's, or null while the model loads.
  std::string render(const runtime::SchedulerStats* stats);

 private:
  // Counters only go up: each scrape adds what the scheduler's totals grew by since the last.
  void advance(prometheus::Counter& c, double total);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Counter &prompt_tokens_, &generated_tokens_, &steps_;
  prometheus::Counter& device_losses_;
  prometheus::Gauge &prompt_rate_, &generated_rate_, &queued_, &busy_, &slots_, &devices_;
  prometheus::Family<prometheus::Counter>& compute_seconds_;
  prometheus::Family<prometheus::Counter>& collective_seconds_;
  std::mutex mu_;                              // scrapes
  std::map<const void*, double> last_totals_;  // per counter: the total it was advanced to
};

}  // namespace weft::serve
