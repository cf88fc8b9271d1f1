// Collectives across processes on stories260K. Reduced-precision wires (--wire bf16 | f16) halve
// the bytes of every all-reduce, in-process (shared memory) and across processes (Gloo over TCP,
// and the host's shared memory that workers on one host use: --net-shm on | off), keeping
// the greedy tokens of one device and logits within kBf16WireLogitRelTol / kF16WireLogitRelTol of
// it. Prompts over a group beyond loopback overlap each chunk's all-reduce with the next chunk's
// matmul and keep f32 results within kF32LogitRelTol.
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

#include "device/remote/remote_device.h"
#include "device/worker_process.h"
#include "support/shared_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace weft::runtime {
namespace {

// Relative to the largest logit magnitude, f32 KV cache. bf16 keeps 8 bits of mantissa: each
// all-reduce result is off by up to 2^-9 relative, through every layer's two all-reduces.
// Measured here: bf16 1.3e-3 (shm) to 2.8e-3 (Gloo, whose ring rounds every partial sum), f16
// 1.7e-4 to 3.3e-4.
constexpr double kBf16WireLogitRelTol = 1e-2;
constexpr double kF16WireLogitRelTol = 1e-3;
// f32 across devices: the same products, summed in another order.
constexpr double kF32LogitRelTol = 1e-4;

const std::string kStories = std::string(WEFT_SHARED_DIR) + "/models/stories260K.gguf";
using device::DeviceSpec;
using device::remote::testing_support::Worker;

EngineOptions with(std::vector<DeviceSpec> devices, parallel::WireType wire) {
  EngineOptions o;
  o.devices = std::move(devices);
  o.mode = o.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
  o.wire = wire;
  o.n_ctx = 256;
  o.k_type = o.v_type = DType::F32;
  return o;
}

std::vector<Token> greedy(Engine& e, const std::vector<Token>& prompt) {
  model::SamplingParams p;
  p.temp = 0;
  return generate(e, nullptr, prompt, 48, p).generated;
}

double worst_logit_diff(Engine& ref, Engine& e, const std::vector<Token>& prompt) {
  ref.reset();
  e.reset();
  std::vector<Token> feed = prompt;
  double worst = 0;
  for (int step = 0; step < 4; ++step) {
    const auto a = ref.eval_logits(feed), b = e.eval_logits(feed);
    double scale = 1e-6;
    for (float x : a) scale = std::max(scale, std::abs(static_cast<double>(x)));
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]) / scale);
    feed = {static_cast<Token>(std::max_element(a.begin(), a.end()) - a.begin())};
  }
  return worst;
}

TEST(Wire, HalfPrecisionWiresKeepGreedyTokensInProcessAndAcrossProcesses) {
  WEFT_NEED_SHARED_FILE(kStories);
  auto f = gguf::File::open(kStories);
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  const auto prompt = tok->encode("Once upon a time", true);
  const DeviceSpec cpu{DeviceSpec::Kind::Cpu, 1, -1, ""};
  Engine ref(*f, with({cpu}, parallel::WireType::F32));
  const auto want = greedy(ref, prompt);
  Worker w1, w2;
  const DeviceSpec r1{DeviceSpec::Kind::Remote, 1, -1, w1.address()}, r2{DeviceSpec::Kind::Remote, 1, -1, w2.address()};
  const auto saved = device::remote::coordinator_config();
  for (auto wire : {parallel::WireType::BF16, parallel::WireType::F16}) {
    const double tol = wire == parallel::WireType::BF16 ? kBf16WireLogitRelTol : kF16WireLogitRelTol;
    struct Mix {
      std::string name;
      std::vector<DeviceSpec> devices;
      bool host_shm;
    };
    const std::vector<Mix> mixes = {{"shm tp3", {cpu, cpu, cpu}, true},
                                    {"gloo 2 workers", {r1, r2}, false},
                                    {"gloo cpu + 2 workers", {cpu, r1, r2}, false},
                                    {"host shm 2 workers", {r1, r2}, true},
                                    {"host shm cpu + 2 workers", {cpu, r1, r2}, true}};
    for (const auto& [name, devices, host_shm] : mixes) {
      auto config = saved;
      config.host_shm = host_shm;
      device::remote::set_coordinator_config(config);
      Engine e(*f, with(devices, wire));
      EXPECT_EQ(greedy(e, prompt), want) << name << " " << parallel::wire_type_name(wire);
      const double worst = worst_logit_diff(ref, e, prompt);
      EXPECT_LT(worst, tol) << name << " " << parallel::wire_type_name(wire);
      EXPECT_GT(worst, 1e-6) << name << ": logits bit-identical to f32, so the wire was not "
                             << parallel::wire_type_name(wire);
      std::printf("%s %s: worst logit difference %.2e\n", name.c_str(),
                  std::string(parallel::wire_type_name(wire)).c_str(), worst);
    }
  }
  device::remote::set_coordinator_config(saved);
}

// Prompts of 70 and 100 tokens (chunks of 32 and a short last one) over two and three workers in
// network namespaces (beyond loopback, where the group overlaps): every row-parallel matmul
// overlaps its all-reduce chunk by chunk (CpuGraphRunner::matmul), and results stay.
TEST(Wire, OverlappedPromptAllReducesKeepResults) {
  WEFT_NEED_SHARED_FILE(kStories);
  device::remote::testing_support::Netbed net(3, "none");
  if (!net.ok()) GTEST_SKIP() << "no network namespaces here: " << net.why();
  const std::string key = testing::TempDir() + "/weft_overlap_key_" + std::to_string(::getpid());
  device::remote::testing_support::write_key_file(key, "overlap test key 0123456789\n");
  const auto saved = device::remote::coordinator_config();
  auto with_key = saved;
  with_key.key_file = key;
  device::remote::set_coordinator_config(with_key);
  auto f = gguf::File::open(kStories);
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  std::vector<Token> prompt = tok->encode("Once upon a time, there was a little girl named Lily. She loved to", true);
  for (int i = 0; prompt.size() < 100; ++i) prompt.push_back(prompt[1 + i % 12]);
  const DeviceSpec cpu{DeviceSpec::Kind::Cpu, 1, -1, ""};
  Engine ref(*f, with({cpu}, parallel::WireType::F32));
  std::vector<std::unique_ptr<Worker>> w;
  for (int i = 0; i < 3; ++i)
    w.push_back(std::make_unique<Worker>(std::vector<std::string>{"--auth-key-file", key}, net.ip(i),
                                         std::vector<std::string>{"ip", "netns", "exec", net.ns(i)}));
  auto remote = [&](int i) { return DeviceSpec{DeviceSpec::Kind::Remote, 1, -1, w[i]->address()}; };
  for (size_t n : {size_t{70}, size_t{100}}) {
    const std::vector<Token> p(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n));
    const auto want = greedy(ref, p);
    for (const auto& devices : {std::vector{remote(0), remote(1)}, std::vector{remote(0), remote(1), remote(2)}}) {
      Engine e(*f, with(devices, parallel::WireType::F32));
      EXPECT_EQ(greedy(e, p), want) << devices.size() << " workers, " << n << " tokens";
      EXPECT_LT(worst_logit_diff(ref, e, p), kF32LogitRelTol) << devices.size() << " workers, " << n << " tokens";
    }
  }
  device::remote::set_coordinator_config(saved);
}

}  // namespace
}  // namespace weft::runtime
