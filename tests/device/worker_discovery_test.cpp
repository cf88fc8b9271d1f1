// `--devices auto`: workers started with --announce are found on loopback, authenticated and used
// (the same greedy text as one device); one holding another key is named on stderr and left out.
#include "device/worker_process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace weft::device::remote {
namespace {

using testing_support::shell;
using testing_support::stories;
using testing_support::Worker;
using testing_support::write_key_file;

// A discovery port of this process's own, so that parallel test runs do not find each other's workers.
std::string discover_addr(int k) { return "239.255.87.70:" + std::to_string(40000 + (::getpid() * 7 + k) % 20000); }

std::vector<std::string> announcing(const std::string& addr, const std::string& key) {
  return {"--announce", "--discover-addr", addr, "--auth-key-file", key};
}

struct RunOutput {
  std::string out, err;
};
// `weft run` greedy over `devices` (and `extra`), stdout and stderr apart.
RunOutput run(const std::string& devices, const std::string& extra = "") {
  const std::string err = ::testing::TempDir() + "/weft_discovery_err_" + std::to_string(::getpid());
  RunOutput r;
  r.out = shell(std::string(WEFT_BINARY) + " run --temp 0 -n 24 -p 'Once upon a time' -t 1 -m " + stories() +
                " --devices " + devices + " --net-poll block " + extra + " 2>" + err + "; echo \"exit=$?\"");
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove(err);
  return r;
}

class WorkerDiscovery : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = ::testing::TempDir() + "/weft_discovery_key_" + std::to_string(::getpid());
    other_key_ = key_ + "_other";
    write_key_file(key_, "the key of this test's group");
    write_key_file(other_key_, "a key of some other group");
  }
  void TearDown() override {
    std::filesystem::remove(key_);
    std::filesystem::remove(other_key_);
  }
  std::string coordinator(const std::string& addr) const {
    return "--discover-addr " + addr + " --discover-iface 127.0.0.1 --auth-key-file " + key_;
  }
  std::string key_, other_key_;
};

TEST_F(WorkerDiscovery, AnnouncingWorkersAreFoundAndGiveTheOneDeviceText) {
  const std::string addr = discover_addr(0);
  Worker w1(announcing(addr, key_)), w2(announcing(addr, key_));
  const RunOutput one = run("cpu:1");
  const RunOutput found = run("auto", coordinator(addr));
  ASSERT_NE(one.out.find("exit=0"), std::string::npos) << one.err;
  EXPECT_EQ(found.out, one.out) << found.err;
  for (const Worker* w : {&w1, &w2})
    EXPECT_NE(found.err.find("discovered worker " + w->url()), std::string::npos) << found.err;
  EXPECT_NE(found.err.find("3 devices, split tensor"), std::string::npos) << found.err;
}

TEST_F(WorkerDiscovery, AWorkerWithAnotherKeyIsLeftOutAndTheRunGoesOn) {
  const std::string addr = discover_addr(1);
  Worker good(announcing(addr, key_)), stranger(announcing(addr, other_key_));
  const RunOutput one = run("cpu:1");
  const RunOutput found = run("auto", coordinator(addr));
  EXPECT_EQ(found.out, one.out) << found.err;
  EXPECT_NE(found.err.find("discovered worker " + good.url()), std::string::npos) << found.err;
  EXPECT_NE(found.err.find("left out worker " + stranger.url()), std::string::npos) << found.err;
  EXPECT_EQ(found.err.find("discovered worker " + stranger.url()), std::string::npos) << found.err;
  EXPECT_NE(found.err.find("2 devices, split tensor"), std::string::npos) << found.err;
}

TEST_F(WorkerDiscovery, NoWorkerAnsweringIsAClearError) {
  const RunOutput r = run("auto", coordinator(discover_addr(2)) + " --discover-timeout 300");
  EXPECT_EQ(r.out.find("exit=0"), std::string::npos);
  EXPECT_NE(r.err.find("no usable worker answered"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace weft::device::remote
