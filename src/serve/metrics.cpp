#include "serve/metrics.h"

#include <prometheus/text_serializer.h>

#include <string>

namespace weft::serve {

namespace {
using prometheus::BuildCounter;
using prometheus::BuildGauge;
}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter().Name("weft_requests_total").Help("HTTP requests by status").Register(*registry_)),
      prompt_tokens_(BuildCounter()
                         .Name("weft_prompt_tokens_total")
                         .Help("Prompt tokens computed (cached ones not counted)")
                         .Register(*registry_)
                         .Add({})),
      generated_tokens_(
          BuildCounter().Name("weft_generated_tokens_total").Help("Tokens sampled").Register(*registry_).Add({})),
      steps_(BuildCounter().Name("weft_steps_total").Help("Engine steps (batched)").Register(*registry_).Add({})),
      device_losses_(BuildCounter()
                         .Name("weft_device_losses_total")
                         .Help("Devices lost mid-run and re-planned around (--on-device-loss replan)")
                         .Register(*registry_)
                         .Add({})),
      prompt_rate_(BuildGauge()
                       .Name("weft_prompt_tokens_per_second")
                       .Help("Prompt tokens per second of stepping over the last 10 s")
                       .Register(*registry_)
                       .Add({})),
      generated_rate_(BuildGauge()
                          .Name("weft_generated_tokens_per_second")
                          .Help("Generated tokens per second of stepping over the last 10 s")
                          .Register(*registry_)
                          .Add({})),
      queued_(BuildGauge().Name("weft_queue_depth").Help("Requests waiting for a slot").Register(*registry_).Add({})),
      busy_(BuildGauge().Name("weft_slots_busy").Help("Slots serving a request").Register(*registry_).Add({})),
      slots_(BuildGauge().Name("weft_slots").Help("KV cache slots (-np)").Register(*registry_).Add({})),
      devices_(BuildGauge().Name("weft_devices").Help("Devices the model runs on now").Register(*registry_).Add({})),
      compute_seconds_(BuildCounter()
                           .Name("weft_device_compute_seconds_total")
                           .Help("Seconds each device spent in its ops")
                           .Register(*registry_)),
      collective_seconds_(BuildCounter()
                              .Name("weft_device_collective_seconds_total")
                              .Help("Seconds each device spent in collectives, waiting for peers included")
                              .Register(*registry_)) {}

void Metrics::count_request(int status) { requests_.Add({{"status", std::to_string(status)}}).Increment(); }

void Metrics::advance(prometheus::Counter& c, double total) {
  double& last = last_totals_[&c];
  if (total > last) c.Increment(total - last);
  last = std::max(last, total);
}

std::string Metrics::render(const runtime::SchedulerStats* stats) {
  std::lock_guard lock(mu_);
  if (stats) {
    advance(prompt_tokens_, static_cast<double>(stats->prompt_tokens));
    advance(generated_tokens_, static_cast<double>(stats->generated_tokens));
    advance(steps_, static_cast<double>(stats->steps));
    prompt_rate_.Set(stats->prompt_tokens_per_second);
    generated_rate_.Set(stats->generated_tokens_per_second);
    queued_.Set(stats->queued);
    busy_.Set(stats->busy_slots);
    slots_.Set(stats->slots);
    advance(device_losses_, static_cast<double>(stats->device_losses));
    devices_.Set(static_cast<double>(stats->devices.size()));
    for (const auto& d : stats->devices) {
      advance(compute_seconds_.Add({{"device", d.name}}), d.compute_seconds);
      advance(collective_seconds_.Add({{"device", d.name}}), d.collective_seconds);
    }
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace weft::serve
