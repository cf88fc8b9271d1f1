#include "core/sched_policy.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <thread>

namespace weft {
namespace {

TEST(SchedPolicy, BatchIsSetForTheThreadAndInheritedByThreadsItStarts) {
  SchedPolicy own = SchedPolicy::Normal, child = SchedPolicy::Normal, back = SchedPolicy::Batch;
  std::thread t([&] {  // its own thread, so the test runner's stays as it was
    set_sched_policy(SchedPolicy::Batch);
    own = current_sched_policy();
    std::thread([&] { child = current_sched_policy(); }).join();
    set_sched_policy(SchedPolicy::Normal);
    back = current_sched_policy();
  });
  t.join();
  EXPECT_EQ(own, SchedPolicy::Batch);
  EXPECT_EQ(child, SchedPolicy::Batch);
  EXPECT_EQ(back, SchedPolicy::Normal);
  EXPECT_EQ(current_sched_policy(), SchedPolicy::Normal);
}

TEST(SchedPolicy, ParsesTheTwoNamesAndRejectsOthers) {
  EXPECT_EQ(parse_sched_policy("batch"), SchedPolicy::Batch);
  EXPECT_EQ(parse_sched_policy("normal"), SchedPolicy::Normal);
  EXPECT_THROW(parse_sched_policy("fifo"), Error);
  EXPECT_THROW(parse_sched_policy(""), Error);
}

}  // namespace
}  // namespace weft
