// Test helpers for the scheduler: a greedy request for a prompt, and a job's whole text (a
// bounded wait, errors reported as test failures).
#pragma once

#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::test_support {

inline runtime::JobRequest greedy_request(std::vector<Token> prompt, int max_tokens) {
  runtime::JobRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temp = 0;
  return r;
}

// The job's whole text, once it finished; its final usage in *usage where asked.
inline std::string text_of(runtime::Job& job, runtime::JobUsage* usage = nullptr) {
  std::string text;
  for (int waited = 0; waited < 20000; waited += 100) {
    const runtime::JobUpdate u = job.next(100);
    text += u.text;
    if (usage) *usage = u.usage;
    if (u.error) ADD_FAILURE() << u.error->what();
    if (u.finished || u.error) return text;
  }
  ADD_FAILURE() << "the job did not finish";
  return text;
}

}  // namespace weft::test_support
