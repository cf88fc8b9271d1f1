// Test helper: a tiny generated model on disk with the logits one local CPU device computes, and
// a check that a remote device loading it (from wherever its worker gets the weights) agrees.
#pragma once

#include "device/cpu/cpu_device.h"
#include "device/remote/remote_device.h"
#include "model/llama_graph.h"
#include "model/model_config.h"
#include "parallel/planner.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace weft::device::remote::testing_support {

// A generated model on disk, one device's graph, and the logits a local CPU device computes.
struct Tiny {
  std::string dir, path;
  std::unique_ptr<gguf::File> file;
  parallel::Plan plan;
  Step step;
  std::vector<float> ref_logits;

  // split_max_tensors > 0: written as a split model of that many tensors a part; path is its first.
  explicit Tiny(const std::string& name, size_t split_max_tensors = 0) {
    dir = testing::TempDir() + "/" + name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/models");
    tools::GenModelOptions o;
    o.type = "q4_0";
    o.seed = 11;
    o.path = dir + "/models/tiny.gguf";
    o.split_max_tensors = split_max_tensors;
    path = tools::generate_model(o)[0];
    file = gguf::File::open(path);
    const auto cfg = model::read_config(*file);
    plan =
        parallel::make_plan(parallel::SplitMode::None, model::build_llama_graph(cfg), model::weight_table(*file), {1});
    step = Step::single({1, 5, 9, 3}, 0, /*want_candidates=*/false, /*want_logits=*/true);
    CpuDevice cpu({});
    cpu.load(plan.devices[0], *file, {64, 1, 8});
    cpu.submit(step);
    ref_logits = cpu.wait().seqs.at(0).logits;
  }
  uint64_t weight_bytes() const {
    uint64_t n = 0;
    for (const auto& t : file->tensors()) n += t.n_bytes;
    return n;
  }
  // Loads onto the worker, checks the logits, returns how the weights got there.
  LoadReport load_on(const std::string& address) {
    RemoteDevice d(address, 1, {});
    d.load(plan.devices[0], *file, {64, 1, 8});
    d.submit(step);
    EXPECT_EQ(d.wait().seqs.at(0).logits, ref_logits);
    return d.load_report();
  }
};

// A worker writes a streamed shard to its cache while the session goes on: waits (up to 60 s) until
// dir holds exactly one entry and no temporary file, and returns it ("" on timeout).
inline std::string wait_for_cache_entry(const std::string& dir) {
  for (int i = 0; i < 600; ++i) {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path());
    if (files.size() == 1 && files[0].extension() == ".gguf") return files[0].string();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

}  // namespace weft::device::remote::testing_support
