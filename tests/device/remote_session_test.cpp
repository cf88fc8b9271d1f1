// Remote sessions beyond the happy path: a coordinator killed mid-generation leaves its workers
// serving the next one; a worker that stops answering without closing its connection (a dead
// host, simulated by SIGSTOP) is named within the heartbeat silence bound; weights come from the
// worker's model dir or its cache instead of the network (bytes streamed counted); --rpc and
// --auth-key-file on the coordinator; workers in separate network namespaces when `ip netns` works.
#include "core/error.h"
#include "device/cpu/cpu_device.h"
#include "device/remote/remote_device.h"
#include "model/llama_graph.h"
#include "model/model_config.h"
#include "parallel/planner.h"
#include "tiny_model.h"
#include "worker_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>

namespace weft::device::remote {
namespace {

using namespace testing_support;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// Waits up to `limit` for pid to exit; returns its status, or -1 (after killing it) when it did not.
int wait_exit(pid_t pid, std::chrono::milliseconds limit, Clock::duration* took) {
  const auto t0 = Clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() - t0 > limit) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *took = Clock::now() - t0;
  return status;
}

// Waits up to 60 s until the file holds `needle` `count` times (a slow build loads slowly too).
bool wait_for_text(const std::string& path, const std::string& needle, int count,
                   std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  for (int i = 0; i < limit.count() / 20; ++i) {
    const std::string text = read_all(path);
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    if (n >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(RemoteSession, CoordinatorKilledMidGenerationLeavesWorkersServing) {
  const std::string tag = std::to_string(::getpid());  // test binaries of other checkouts may run at once
  const std::string log1 = testing::TempDir() + "/weft_coord_kill_w1_" + tag,
                    log2 = testing::TempDir() + "/weft_coord_kill_w2_" + tag;
  Worker w1({}, "127.0.0.1", {}, log1), w2({}, "127.0.0.1", {}, log2);
  const std::string ref = greedy_text(stories(), "cpu:1");
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  const std::string err = testing::TempDir() + "/weft_coord_kill_stderr";
  const pid_t pid = start_long_run(w1.url() + "," + w2.url(), err);
  ASSERT_TRUE(wait_for_text(err, "loaded in", 2)) << read_all(err);  // both workers loaded ...
  std::this_thread::sleep_for(std::chrono::milliseconds(500));       // ... and generating
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << read_all(err);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  // Each worker ends its session promptly ("session from ... ended" or "... failed: ..."): one of
  // them may have been sent a step the other never got, and must not sit in that step's
  // all-reduce until the group's timeout (30 s).
  for (const std::string& log : {log1, log2})
    EXPECT_TRUE(wait_for_text(log, "session from", 2, std::chrono::seconds(5))) << read_all(log);
  // The same workers serve a new session, with the right tokens, twice over.
  EXPECT_EQ(greedy_text(stories(), w1.url() + "," + w2.url(), "-ts 1,3"), ref);
  EXPECT_EQ(greedy_text(stories(), w2.url() + ",cpu:1," + w1.url()), ref);
}

// `devices` names the workers as {w1} and {w2} (w1 may be left out); w2 is stopped mid-generation.
void expect_silent_worker_named(const std::string& devices, const std::string& tag) {
  Worker w1, w2;
  std::string list = devices;
  for (auto [name, w] : {std::pair{"{w1}", &w1}, std::pair{"{w2}", &w2}})
    if (const size_t at = list.find(name); at != std::string::npos) list.replace(at, 4, w->url());
  const std::string err = testing::TempDir() + "/weft_stop_stderr_" + tag;
  const pid_t pid = start_long_run(list, err, {"--on-device-loss", "fail"});  // the stop ends the run
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << read_all(err);
  // SIGSTOP: the connection stays open and nothing is reset, as when the host loses power. The
  // first worker keeps sending heartbeats while stuck in an all-reduce with the stopped one, and a
  // local device (when there is one) sits in that all-reduce too.
  w2.kill(SIGSTOP);
  Clock::duration took{};
  const auto bound = std::chrono::milliseconds(kPeerSilenceMs + 3000);
  status = wait_exit(pid, bound, &took);
  w2.kill(SIGCONT);
  ASSERT_NE(status, -1) << list << ": coordinator still running " << bound.count() << " ms after the worker stopped";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  const std::string text = read_all(err);
  EXPECT_NE(text.find(w2.url()), std::string::npos) << text;
  EXPECT_NE(text.find("heartbeat"), std::string::npos) << text;
}

TEST(RemoteSession, SilentWorkerIsNamedWithinTheHeartbeatBound) { expect_silent_worker_named("{w1},{w2}", "remote"); }

// The coordinator's own CPU device is a Gloo rank too: it must not sit out Gloo's timeout.
TEST(RemoteSession, SilentWorkerIsNamedWithinTheHeartbeatBoundWithALocalDevice) {
  expect_silent_worker_named("cpu:1,{w1},{w2}", "local_first");
  expect_silent_worker_named("{w2},cpu:1", "local_only_peer");
}

TEST(RemoteSession, WeightsComeFromModelDirOrCacheElseAreStreamedOnce) {
  CoordinatorConfig quiet;
  quiet.progress = false;
  set_coordinator_config(quiet);
  Tiny m("weft_weights_src");
  ASSERT_GT(m.ref_logits.size(), 10u);
  ASSERT_NE(m.ref_logits[0], m.ref_logits[1]);  // the logits vary: equality below means something
  {                                             // the same file in the worker's --model-dir: nothing streamed
    Worker w({"--model-dir", m.dir + "/models"});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::ModelDir);
    EXPECT_EQ(r.bytes_streamed, 0u);
  }
  const std::string cache = m.dir + "/cache";
  {  // no copy: streamed, exactly the slices' bytes (here the whole model), then cached
    Worker w({"--cache-dir", cache});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::Stream);
    EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
    ASSERT_NE(wait_for_cache_entry(cache), "");
  }
  {  // a restarted worker with that cache does not restream
    Worker w({"--cache-dir", cache});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::Cache);
    EXPECT_EQ(r.bytes_streamed, 0u);
  }
  {  // a file of the same size but other bytes is not the model: streamed
    fs::create_directories(m.dir + "/other");
    fs::copy_file(m.path, m.dir + "/other/tiny.gguf");
    std::fstream f(m.dir + "/other/tiny.gguf", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
    f.close();
    Worker w({"--model-dir", m.dir + "/other"});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::Stream);
    EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
  }
}

// A split model: a worker finds all its parts in --model-dir (nothing streamed); one without them,
// or missing a part, is streamed its slices from the coordinator's part mappings.
TEST(RemoteSession, SplitModelPartsFromModelDirElseStreamed) {
  CoordinatorConfig quiet;
  quiet.progress = false;
  set_coordinator_config(quiet);
  Tiny m("weft_weights_split_parts", /*split_max_tensors=*/5);
  ASSERT_GT(m.file->part_paths().size(), 2u);
  ASSERT_GT(m.ref_logits.size(), 10u);
  {
    Worker w({"--model-dir", m.dir + "/models"});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::ModelDir);
    EXPECT_EQ(r.bytes_streamed, 0u);
  }
  {
    Worker w;
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::Stream);
    EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
  }
  {  // every part but the last
    fs::create_directories(m.dir + "/partial");
    const auto& parts = m.file->part_paths();
    for (size_t i = 0; i + 1 < parts.size(); ++i)
      fs::copy_file(parts[i], m.dir + "/partial/" + fs::path(parts[i]).filename().string());
    Worker w({"--model-dir", m.dir + "/partial"});
    const LoadReport r = m.load_on(w.address());
    EXPECT_EQ(r.source, LoadSource::Stream);
    EXPECT_EQ(r.bytes_streamed, m.weight_bytes());
  }
}

// Perplexity's scored rows cross the wire as three numbers each; the result matches one device.
TEST(RemoteSession, PerplexityOverWorkersMatchesOneDevice) {
  Worker w1, w2;
  const std::string text = testing::TempDir() + "/weft_remote_ppl.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 5; ++i)
      out << "Once upon a time, there was a little girl named Lily. She saw a big, red ball.\n";
  }
  auto ppl = [&](const std::string& devices) {
    return shell(std::string(WEFT_BINARY) + " perplexity -m " + stories() + " -f " + text + " -c 32 -b 64 --devices " +
                 devices + " --net-poll block 2>/dev/null; echo \"exit=$?\"");
  };
  const std::string ref = ppl("cpu:1");
  ASSERT_NE(ref.find("Final estimate: PPL = "), std::string::npos) << ref;
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  const std::string remote = ppl("cpu:1," + w1.url() + "," + w2.url());
  const auto final_ppl = [](const std::string& out) {
    const size_t at = out.find("PPL = ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 6));
  };
  EXPECT_NEAR(final_ppl(remote), final_ppl(ref), 1e-3 * final_ppl(ref)) << remote;
}

TEST(RemoteSession, TensorSplitFromModelDirWithRpcAndKeyFileMatchesOneDevice) {
  Tiny m("weft_split_src");
  const std::string key = m.dir + "/key";
  write_key_file(key, "a shared key of some length\n");
  Worker w1({"--model-dir", m.dir + "/models", "--auth-key-file", key});
  Worker w2({"--model-dir", m.dir + "/models", "--auth-key-file", key});
  const std::string ref = greedy_text(m.path, "cpu:1");
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  // --rpc appends the workers after --devices; the key comes from --auth-key-file.
  EXPECT_EQ(
      greedy_text(m.path, "cpu:1", "--rpc " + w1.address() + "," + w2.address() + " -ts 1,2,1 --auth-key-file " + key),
      ref);
  // A worker with a zero share reads its empty slices from the model too.
  EXPECT_EQ(
      greedy_text(m.path, "cpu:1", "--rpc " + w1.address() + "," + w2.address() + " -ts 1,0,1 --auth-key-file " + key),
      ref);
  const std::string err = shell(std::string(WEFT_BINARY) + " run --temp 0 -n 4 -p hi -m " + m.path + " --devices " +
                                w1.url() + "," + w2.url() + " --auth-key-file " + key + " 2>&1 >/dev/null");
  EXPECT_NE(err.find(w1.url() + ": weights from the worker's model dir"), std::string::npos) << err;
  // Without the key the workers refuse.
  EXPECT_EQ(greedy_text(m.path, "cpu:1", "--rpc " + w1.address()).find("exit=0"), std::string::npos);
}

// Streamed weights over MACed frames: chunks that span slices are received in pieces and their
// tags still check (a wrong tag would end the session, so the tokens would not match).
TEST(RemoteSession, StreamedWeightsWithAKeyMatchOneDevice) {
  Tiny m("weft_split_stream_key");
  const std::string key = m.dir + "/key";
  write_key_file(key, "another shared key of some length\n");
  Worker w1({"--auth-key-file", key}), w2({"--auth-key-file", key});
  const std::string ref = greedy_text(m.path, "cpu:1");
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  EXPECT_EQ(greedy_text(m.path, w1.url() + ",cpu:1," + w2.url(), "-ts 2,1,1 --auth-key-file " + key), ref);
}

// Three workers on links of the 100 us / 10 Gbit profile (the rate only where the kernel has no
// netem): the same tokens as one device, with and without the coordinator's own CPU device.
TEST(RemoteSession, WorkersInSeparateNetworkNamespaces) {
  Netbed net(3, "100us-10gbit");
  if (!net.ok()) GTEST_SKIP() << "no network namespaces here, loopback tests only: " << net.why();
  const std::string key = testing::TempDir() + "/weft_netns_key";
  write_key_file(key, "netns test key 0123456789\n");
  std::vector<std::unique_ptr<Worker>> w;
  for (int i = 0; i < 3; ++i)
    w.push_back(std::make_unique<Worker>(std::vector<std::string>{"--auth-key-file", key}, net.ip(i),
                                         std::vector<std::string>{"ip", "netns", "exec", net.ns(i)}));
  const std::string ref = greedy_text(stories(), "cpu:1");
  ASSERT_NE(ref.find("exit=0"), std::string::npos) << ref;
  const std::string urls = w[0]->url() + "," + w[1]->url() + "," + w[2]->url();
  EXPECT_EQ(greedy_text(stories(), urls, "--auth-key-file " + key), ref);
  EXPECT_EQ(greedy_text(stories(), "cpu:1," + urls, "--auth-key-file " + key), ref);
}

}  // namespace
}  // namespace weft::device::remote
