// All-reduce latency: what tensor parallel pays twice per layer per token. In process (shared
// memory) and between two processes over loopback (Gloo: sync busy-poll, sync blocking, async),
// next to a raw TCP exchange of the same bytes, the floor any transport can reach.
//   build/bench/weft_microbench --benchmark_filter='shm|gloo|raw_tcp'
#include "net/kv_store.h"
#include "net/socket.h"
#include "parallel/gloo_group.h"
#include "parallel/group.h"

#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

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

// Across processes the peer is a forked child making the same number of calls, so the count is
// fixed (kCalls) rather than chosen by the benchmark library.
constexpr int kCalls = 2000, kWarmup = 100;
constexpr int calls_for(size_t floats) { return floats <= 8192 ? kCalls : kCalls / 10; }

void wait_child(pid_t pid, benchmark::State& state) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("the peer process failed");
}

// Arg: floats per all-reduce. Gloo between this process (rank 0) and a forked rank 1, over
// loopback TCP or (host_shm) the host's shared memory that two processes of one host choose.
void gloo_all_reduce(benchmark::State& state, bool busy, size_t sync_chunk_bytes, bool host_shm = false) {
  const size_t n = static_cast<size_t>(state.range(0));
  net::KvServer store("127.0.0.1");
  parallel::GlooOptions opt{
      "127.0.0.1:" + std::to_string(store.port()), "lat", "127.0.0.1", 5000, busy, sync_chunk_bytes};
  opt.host_shm = host_shm;
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      auto g = parallel::make_gloo_group(1, 2, parallel::WireType::F32, opt);
      std::vector<float> x(n, 1.0f);
      for (int i = 0; i < calls_for(n) + kWarmup; ++i) g->all_reduce_sum(x.data(), n);
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  auto g = parallel::make_gloo_group(0, 2, parallel::WireType::F32, opt);
  std::vector<float> x(n, 1.0f);
  for (int i = 0; i < kWarmup; ++i) g->all_reduce_sum(x.data(), n);  // rings built
  for (auto _ : state) g->all_reduce_sum(x.data(), n);
  wait_child(pid, state);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 4);
}
void BM_gloo_all_reduce_busy_poll(benchmark::State& s) { gloo_all_reduce(s, true, parallel::kSyncChunkBytes); }
void BM_gloo_all_reduce_blocking(benchmark::State& s) { gloo_all_reduce(s, false, parallel::kSyncChunkBytes); }
void BM_gloo_all_reduce_async(benchmark::State& s) { gloo_all_reduce(s, false, 0); }
void BM_host_shm_all_reduce_spin(benchmark::State& s) { gloo_all_reduce(s, true, parallel::kSyncChunkBytes, true); }
void BM_host_shm_all_reduce_sleep(benchmark::State& s) { gloo_all_reduce(s, false, parallel::kSyncChunkBytes, true); }
// Args: one decoded token of the 500m model (2048 floats), 16 batched tokens, a 128-token prompt.
#define WEFT_GLOO_SIZES(fn)                                               \
  BENCHMARK(fn)->Arg(2048)->Iterations(calls_for(2048))->UseRealTime();   \
  BENCHMARK(fn)->Arg(32768)->Iterations(calls_for(32768))->UseRealTime(); \
  BENCHMARK(fn)->Arg(262144)->Iterations(calls_for(262144))->UseRealTime()
WEFT_GLOO_SIZES(BM_gloo_all_reduce_busy_poll);
WEFT_GLOO_SIZES(BM_gloo_all_reduce_blocking);
WEFT_GLOO_SIZES(BM_gloo_all_reduce_async);
WEFT_GLOO_SIZES(BM_host_shm_all_reduce_spin);
WEFT_GLOO_SIZES(BM_host_shm_all_reduce_sleep);

// What a two-rank ring all-reduce moves, over plain TCP_NODELAY sockets: both sides send the
// bytes, then each reads the other's.
void BM_raw_tcp_exchange(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) * 4;
  net::Listener l({"127.0.0.1", 0});
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      net::Socket s = net::connect_tcp({"127.0.0.1", l.port()}, 5000);
      std::vector<uint8_t> in(bytes), out(bytes, 1);
      for (int i = 0; i < calls_for(bytes / 4) + kWarmup; ++i) {
        s.send_all(out.data(), bytes, 5000);
        s.recv_exact(in.data(), bytes, 5000);
      }
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  net::Socket s = l.accept(5000);
  std::vector<uint8_t> in(bytes), out(bytes, 2);
  auto round = [&] {
    s.send_all(out.data(), bytes, 5000);
    s.recv_exact(in.data(), bytes, 5000);
  };
  for (int i = 0; i < kWarmup; ++i) round();
  for (auto _ : state) round();
  wait_child(pid, state);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}
WEFT_GLOO_SIZES(BM_raw_tcp_exchange);

}  // namespace
