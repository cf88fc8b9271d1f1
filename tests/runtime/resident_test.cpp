// A loaded model is resident once: CPU devices copy their weight slices onto their own pages and
// give the file mapping's pages back (gguf::File::release), so the mapping's resident set after a
// load is a few pages of metadata, not the model a second time.
#include "gguf/gguf_reader.h"
#include "runtime/engine.h"
#include "tools/gen_model.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

namespace weft::runtime {
namespace {

// Resident kB of the mapping holding `p`, from /proc/self/smaps.
int64_t mapping_rss_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    // Mapping headers look like "7f12a000-7f12c000 r--p ...", field lines like "Rss:   12 kB".
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4));
  }
  return -1;
}

TEST(Resident, LoadedWeightsLeaveTheFileMapping) {
  tools::GenModelOptions o;
  o.preset = "tiny";
  o.type = "q8_0";
  o.overrides = {.n_embd = 512, .n_layer = 4, .n_ff = 1536, .n_head = 8, .n_head_kv = 4, .n_vocab = 2048};
  const auto bytes = tools::generate_model_bytes(o);
  const std::string path = testing::TempDir() + "/weft_resident.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (const char* devices : {"one", "tp2"}) {
    auto f = gguf::File::open(path);
    const void* data = f->tensors().front().data;
    EngineOptions e;
    e.devices.assign(devices == std::string("one") ? 1 : 2, {device::DeviceSpec::Kind::Cpu, 1, -1, ""});
    e.mode = e.devices.size() > 1 ? parallel::SplitMode::Tensor : parallel::SplitMode::None;
    e.n_ctx = 64;
    Engine engine(*f, e);
    const int64_t rss = mapping_rss_kb(data), file_kb = static_cast<int64_t>(bytes.size() / 1024);
    ASSERT_GE(rss, 0) << "mapping not found in /proc/self/smaps";
    // Left resident: the metadata and the embedding rows a lookup reads (never copied).
    const int64_t embd_kb = static_cast<int64_t>(f->tensor("token_embd.weight").n_bytes / 1024);
    EXPECT_LT(rss, embd_kb + 64) << devices << ": " << rss << " kB of a " << file_kb << " kB file still resident";
    model::SamplingParams greedy;
    greedy.temp = 0;
    std::mt19937_64 rng(1);
    const std::vector<Token> prompt = {1, 2, 3};
    EXPECT_GE(engine.eval_and_sample(prompt, greedy, {}, rng), 0);  // the released pages were not needed
  }
}

}  // namespace
}  // namespace weft::runtime
