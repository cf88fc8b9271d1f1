// Loading weights onto workers: a load that takes longer than the heartbeat silence bound still
// succeeds (the worker keeps beating while it receives, hashes, copies and caches); a damaged
// shard-cache entry is found when used, removed and streamed again, with the same results as a
// fresh load.
#include "device/remote/remote_device.h"
#include "device/remote/worker_server.h"
#include "tiny_model.h"
#include "worker_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

namespace weft::device::remote {
namespace {

using namespace testing_support;
namespace fs = std::filesystem;

// A worker in this process (so a test can slow its load down), serving `sessions` sessions.
class InProcessWorker {
 public:
  InProcessWorker(WorkerOptions o, int sessions)
      : server_(init(std::move(o))), thread_([this, sessions] { server_.serve(sessions); }) {}
  ~InProcessWorker() {
    server_.stop();
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_.port()); }

 private:
  static WorkerOptions init(WorkerOptions o) {
    o.listen = {"127.0.0.1", 0};
    o.net_poll = parallel::NetPoll::Block;
    return o;
  }
  WorkerServer server_;
  std::thread thread_;
};

void quiet() {
  CoordinatorConfig c;
  c.progress = false;
  set_coordinator_config(c);
}

TEST(RemoteLoad, LoadSlowerThanTheSilenceBoundIsCarriedByHeartbeats) {
  quiet();
  Tiny m("weft_slow_load");
  WorkerOptions o;
  o.load_delay_ms = 2 * kPeerSilenceMs;  // after the weights arrived: where a worker copies and caches
  InProcessWorker w(o, 1);
  const LoadReport r = m.load_on(w.address());  // checks the logits too
  EXPECT_EQ(r.source, LoadSource::Stream);
  EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
  EXPECT_GT(r.seconds * 1000, 2 * kPeerSilenceMs);  // the delay really happened
}

TEST(RemoteLoad, SlowLoadFromModelDirIsCarriedByHeartbeats) {
  quiet();
  Tiny m("weft_slow_dir_load");
  WorkerOptions o;
  o.model_dir = m.dir + "/models";
  o.load_delay_ms = 2 * kPeerSilenceMs;
  InProcessWorker w(o, 1);
  const LoadReport r = m.load_on(w.address());
  EXPECT_EQ(r.source, LoadSource::ModelDir);
  EXPECT_EQ(r.bytes_streamed, 0u);
}

// Heartbeats come from a thread of the worker process: one that is stopped (its host down, the
// connection open) while busy loading goes silent and is named within the silence bound.
TEST(RemoteLoad, WorkerStoppedWhileLoadingIsNamedWithinTheSilenceBound) {
  quiet();
  Tiny m("weft_stopped_load");
  Worker w({"--test-load-delay-ms", "60000"});
  std::string error;
  std::thread coordinator([&] {
    try {
      m.load_on(w.address());
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(kPeerSilenceMs + 1000));  // beats carried it so far
  const auto t0 = std::chrono::steady_clock::now();
  w.kill(SIGSTOP);
  coordinator.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  w.kill(SIGCONT);
  EXPECT_LT(took, std::chrono::milliseconds(kPeerSilenceMs + 3000));
  EXPECT_NE(error.find(w.url()), std::string::npos) << error;
  EXPECT_NE(error.find("heartbeat"), std::string::npos) << error;
}

// Damages the one cache entry in dir with `damage` (and leaves a stale temporary beside it), then
// checks that the next session streams (with the same logits, checked by load_on) and the one
// after reads a good entry again.
template <typename F>
void expect_damage_restreamed(Tiny& m, const Worker& w, const std::string& cache, F damage) {
  const std::string entry = wait_for_cache_entry(cache);
  ASSERT_NE(entry, "");
  damage(entry);
  std::ofstream(entry + ".tmp99999") << "left by a writer killed mid-write";
  LoadReport r = m.load_on(w.address());
  EXPECT_EQ(r.source, LoadSource::Stream);
  EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
  // Rewritten under the same name (the same content as before); the leftover temporary is gone.
  EXPECT_EQ(wait_for_cache_entry(cache), entry);
  r = m.load_on(w.address());
  EXPECT_EQ(r.source, LoadSource::Cache);
  EXPECT_EQ(r.bytes_streamed, 0u);
}

TEST(RemoteLoad, DamagedCacheEntryIsRemovedAndStreamedAgain) {
  quiet();
  Tiny m("weft_cache_damage");
  const std::string cache = m.dir + "/cache";
  Worker w({"--cache-dir", cache});  // one worker process for every session: no restart needed
  ASSERT_EQ(m.load_on(w.address()).source, LoadSource::Stream);
  ASSERT_NE(wait_for_cache_entry(cache), "");
  ASSERT_EQ(m.load_on(w.address()).source, LoadSource::Cache);
  expect_damage_restreamed(m, w, cache, [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); });
  expect_damage_restreamed(m, w, cache, [](const fs::path& p) {  // one bit, in the tensor data
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  });
  // A restarted worker verifies the entry it finds, too.
  Worker w2({"--cache-dir", cache});
  fs::resize_file(wait_for_cache_entry(cache), 100);
  EXPECT_EQ(m.load_on(w2.address()).source, LoadSource::Stream);
  EXPECT_EQ(m.load_on(w2.address()).source, LoadSource::Cache);
}

}  // namespace
}  // namespace weft::device::remote
