// In-process all-reduce latency: what tensor parallel pays twice per layer per token.
//   build/bench/weft_microbench --benchmark_filter=shm
#include "parallel/group.h"

#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <vector>

namespace {

using namespace weft;

// One group per thread count, shared by the benchmark's threads (thread i is rank i).
std::vector<std::unique_ptr<parallel::Group>>& group_for(int n, bool spin) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<parallel::Group>> groups[2][17];
  std::lock_guard lock(mu);
  auto& g = groups[spin][n];
  if (g.empty()) g = parallel::make_shm_group(n, parallel::WireType::F32, spin);
  return g;
}

// Arg: floats per all-reduce (2048 = one n_embd row of the 500m model).
void shm_all_reduce(benchmark::State& state, bool spin) {
  auto& group = group_for(state.threads(), spin);
  auto& me = *group[state.thread_index()];
  std::vector<float> v(state.range(0), 1.f);
  for (auto _ : state) {
    me.all_reduce_sum(v.data(), v.size());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0) * 4);
}
void BM_shm_all_reduce_spin(benchmark::State& s) { shm_all_reduce(s, true); }
void BM_shm_all_reduce_sleep(benchmark::State& s) { shm_all_reduce(s, false); }
BENCHMARK(BM_shm_all_reduce_spin)->Arg(2048)->Arg(4096)->Threads(2)->UseRealTime();
BENCHMARK(BM_shm_all_reduce_sleep)->Arg(2048)->Arg(4096)->Threads(2)->UseRealTime();

}  // namespace
