// Kernel microbenchmarks against the memory roofline. Decode is memory bound: a matvec must stream
// its weights at close to the machine's copy bandwidth. Every benchmark reports bytes_per_second;
// BM_memcpy is the roofline to divide by.
//   build/bench/weft_microbench --benchmark_filter=. --benchmark_min_time=0.5
// Roofline of decode: BM_matvec_big/<type> (a whole 500m q4_0 model's bytes) / BM_read.
#include "core/huge_buffer.h"
#include "core/stream_read.h"
#include "core/thread_pool.h"
#include "kernels/amx_tile_config.h"
#include "kernels/cpu_features.h"
#include "kernels/isa.h"
#include "kernels/linear_attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quants.h"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace weft;

void BM_memcpy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t n = dram_stream_bytes();
  std::vector<uint8_t> src(n, 1), dst(n);
  ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallel_for(static_cast<int64_t>(n), 4096,
                      [&](int64_t b, int64_t e) { std::memcpy(dst.data() + b, src.data() + b, e - b); });
    benchmark::DoNotOptimize(dst.data());
  }
  // A copy reads and writes every byte.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n) * 2);
}
BENCHMARK(BM_memcpy)->Arg(1)->Arg(2)->UseRealTime();

// Streaming read (what a matvec does with its weights), from DRAM: the roofline of decode.
void BM_read(benchmark::State& state) {
  StreamRead stream(static_cast<int>(state.range(0)), dram_stream_bytes());
  for (auto _ : state) benchmark::DoNotOptimize(stream.read());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(stream.window_bytes()));
}
BENCHMARK(BM_read)->Arg(1)->Arg(2)->UseRealTime();

// The int8 peak of the dot instruction the GEMM uses, from registers only: 16 independent chains
// (enough to cover its latency at full throughput), per thread. Arg 0: threads; arg 1: the ISA's
// sequence, 2 = AVX-512 VNNI vpdpbusd (64 u8 x s8 MACs into int32 per instruction), 1 = AVX2
// vpmaddubsw + vpmaddwd + vpaddd (32 MACs per three), 4 = AVX-VNNI vpdpbusd on ymm (32 MACs).
// Reports MAC/s; pp t/s x MACs per prompt token over it is a prompt's fraction of peak.
constexpr int kPeakChains = 16;
constexpr int64_t kPeakIters = 1 << 16;

WEFT_TARGET_AVX512 int64_t int8_peak_avx512(int8_t seed) {
  __m512i acc[kPeakChains];
  for (auto& a : acc) a = _mm512_set1_epi32(seed);
  const __m512i u = _mm512_set1_epi8(static_cast<char>(seed + 1)), v = _mm512_set1_epi8(static_cast<char>(seed + 2));
  for (int64_t i = 0; i < kPeakIters; ++i) {
#pragma GCC unroll 16
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, u, v);
  }
  __m512i s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm512_add_epi32(s, acc[c]);
  return _mm512_reduce_add_epi32(s);
}

WEFT_TARGET_AVX_VNNI int64_t int8_peak_avx_vnni(int8_t seed) {
  __m256i acc[kPeakChains];
  for (auto& a : acc) a = _mm256_set1_epi32(seed);
  const __m256i u = _mm256_set1_epi8(static_cast<char>(seed + 1)), v = _mm256_set1_epi8(static_cast<char>(seed + 2));
  for (int64_t i = 0; i < kPeakIters; ++i) {
#pragma GCC unroll 16
    for (auto& a : acc) a = _mm256_dpbusd_avx_epi32(a, u, v);
  }
  __m256i s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm256_add_epi32(s, acc[c]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0];
}

WEFT_TARGET_AVX2 int64_t int8_peak_avx2(int8_t seed) {
  __m256i acc[kPeakChains];
  for (auto& a : acc) a = _mm256_set1_epi32(seed);
  // The products read the accumulator (as s8): without it the compiler hoists them out of the loop.
  const __m256i u = _mm256_set1_epi8(static_cast<char>(seed + 1));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < kPeakIters; ++i) {
#pragma GCC unroll 16
    for (auto& a : acc) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), ones));
  }
  __m256i s = acc[0];
  for (int c = 1; c < kPeakChains; ++c) s = _mm256_add_epi32(s, acc[c]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0];
}

// AMX: four TDPBSSD (16 x 16 x 64 MACs each) on independent C tiles, the shape of the prompt GEMM's
// (gemm_amx.cpp) per 64 values.
constexpr int kAmxPeakTiles = 4;
__attribute__((target("amx-tile,amx-int8"))) int64_t int8_peak_amx(int8_t seed) {
  static const kernels::AmxTileConfig config = [] {  // tiles 0-7: 16 rows of 64 bytes
    kernels::AmxTileConfig c;
    for (int i = 0; i < 8; ++i) c.rows[i] = 16, c.colsb[i] = 64;
    return c;
  }();
  alignas(64) int8_t values[16 * 64];
  std::memset(values, seed, sizeof values);
  alignas(64) int32_t out[16 * 16];
  _tile_loadconfig(&config);
  _tile_loadd(0, values, 64);
  _tile_loadd(1, values, 64);
  _tile_loadd(2, values, 64);
  _tile_loadd(3, values, 64);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t i = 0; i < kPeakIters; ++i) {
    _tile_dpbssd(4, 0, 2);
    _tile_dpbssd(5, 0, 3);
    _tile_dpbssd(6, 1, 2);
    _tile_dpbssd(7, 1, 3);
  }
  _tile_stored(4, out, 64);
  _tile_release();
  return out[0];
}

// isa: 1 avx2, 2 avx512, 3 AMX (where cpu_features().amx), 4 AVX-VNNI (where cpu_features().avx_vnni).
void BM_int8_peak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t isa = state.range(1);
  if (isa == 3   ? !kernels::cpu_features().amx
      : isa == 4 ? !kernels::cpu_features().avx_vnni
                 : !kernels::isa_supported(isa == 2 ? kernels::Isa::Avx512 : kernels::Isa::Avx2)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  ThreadPool pool(threads);
  std::vector<int64_t> sink(threads * 8);
  volatile int8_t seed = 1;  // unknown to the compiler: the loop cannot be folded
  for (auto _ : state) {
    pool.run([&](int ith, int) {
      sink[ith * 8] = isa == 3   ? int8_peak_amx(seed)
                      : isa == 4 ? int8_peak_avx_vnni(seed)
                      : isa == 2 ? int8_peak_avx512(seed)
                                 : int8_peak_avx2(seed);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  const double per_iter = isa == 3 ? kAmxPeakTiles * 16 * 16 * 64 : kPeakChains * (isa == 2 ? 64 : 32);
  const double macs_per_iter = static_cast<double>(threads) * kPeakIters * per_iter;
  state.counters["MAC/s"] = benchmark::Counter(macs_per_iter * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(isa == 3   ? "amx tdpbssd"
                 : isa == 4 ? "avx-vnni vpdpbusd"
                 : isa == 2 ? "avx512 vpdpbusd"
                            : "avx2 maddubs+madd+add");
}
BENCHMARK(BM_int8_peak)->ArgsProduct({{1, 2}, {3, 2, 4, 1}})->ArgNames({"threads", "isa"})->UseRealTime();

// Per-call cost of waking the pool and joining it again: decode runs ~200 pool calls a token.
void BM_pool_run(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<int64_t> sink(64);
  for (auto _ : state) pool.parallel_for(64, 16, [&](int64_t b, int64_t) { sink[b] += 1; });
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_pool_run)->Arg(1)->Arg(2)->UseRealTime();

// y = W x for one token (decode) or a batch (prompt), W of the 500m preset's FFN shape (5632 x 2048).
void matmul_bench(benchmark::State& state, DType type, int64_t n_tokens) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = 5632, cols = 2048;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> row(cols), x(cols * n_tokens), y(rows * n_tokens);
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng) * 0.02f;
    kernels::quantize_row_ref(type, row.data(), w.data() + rb * r, cols);
  }
  for (auto& v : x) v = nd(rng);
  kernels::WeightMatrix m{type, w.data(), rows, cols, rb};
  ThreadPool pool(threads);
  kernels::MatmulScratch scratch;
  for (auto _ : state) {
    kernels::matmul(m, x.data(), cols, n_tokens, y.data(), rows, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(type)) + " " + kernels::isa_name(kernels::kernels_for(type).isa));
}

// A matrix of type T as big as the 500m q4_0 model (264 MiB, 2048 columns), repacked into panels
// where the engine repacks it (kernels::can_repack): decode streams this much per token from
// DRAM, so a matvec's bytes_per_second against BM_read is the decode roofline of the type.
class BigMatrix {
 public:
  static constexpr int64_t kCols = 2048;
  BigMatrix(DType type, bool huge) : rb_(row_bytes(type, kCols)) {
    constexpr int64_t tile_rows = 256;
    const int64_t rows = (int64_t{264} << 20) / static_cast<int64_t>(rb_) / tile_rows * tile_rows;
    // Quantize one tile of rows and repeat it: quantizing 240k rows would take seconds.
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(kCols);
    rows_.emplace(rb_ * rows, "bench", "a matrix", huge);
    for (int64_t r = 0; r < tile_rows; ++r) {
      for (auto& v : row) v = nd(rng) * 0.02f;
      kernels::quantize_row_ref(type, row.data(), rows_->data() + rb_ * r, kCols);
    }
    for (int64_t r = tile_rows; r < rows; r += tile_rows)
      std::memcpy(rows_->data() + rb_ * r, rows_->data(), rb_ * tile_rows);
    m_ = kernels::WeightMatrix{type, rows_->data(), rows, kCols, rb_};
    if (kernels::can_repack(m_)) {
      panels_.emplace(kernels::repacked_bytes(m_), "bench", "its panels", huge);
      m_ = kernels::repack(m_, panels_->data());
      rows_.reset();
    }
  }
  const kernels::WeightMatrix& matrix() const { return m_; }
  // Rows [r0, r0 + n) (r0 a multiple of the panel height where repacked).
  kernels::WeightMatrix rows(int64_t r0, int64_t n) const {
    kernels::WeightMatrix head = m_, part = m_;
    head.rows = r0;
    part.rows = n;
    part.data += panels_ ? kernels::repacked_bytes(head) : rb_ * r0;
    return part;
  }
  int64_t bytes() const { return static_cast<int64_t>(rb_) * m_.rows; }  // as stored in the file
  std::string label() const {
    return std::string(dtype_name(m_.type)) + " " + kernels::isa_name(kernels::kernels_for(m_.type).isa) +
           (panels_ ? " panels" : "");
  }

 private:
  size_t rb_;
  std::optional<HugeBuffer> rows_, panels_;
  kernels::WeightMatrix m_{};
};

// Rows [0, part_rows), [part_rows, 2 part_rows), ... of big times n_tokens tokens, one matmul
// each (the rows that do not fill a part are left out).
void big_matmul(benchmark::State& state, const BigMatrix& big, int64_t n_tokens, int64_t part_rows) {
  const int64_t n_parts = big.matrix().rows / part_rows;
  std::vector<float> x(BigMatrix::kCols * n_tokens), y(part_rows * n_tokens);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(static_cast<int>(state.range(0)));
  kernels::MatmulScratch scratch;
  for (auto _ : state) {
    for (int64_t i = 0; i < n_parts; ++i)
      kernels::matmul(big.rows(i * part_rows, part_rows), x.data(), BigMatrix::kCols, n_tokens, y.data(), part_rows,
                      pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * big.bytes() / big.matrix().rows * n_parts *
                          part_rows);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(big.label());
}

void BM_matvec_big(benchmark::State& state, DType type) {
  const BigMatrix big(type, state.range(1) != 0);
  big_matmul(state, big, 1, big.matrix().rows);
}
#define WEFT_MATVEC_BIG(T)                      \
  BENCHMARK_CAPTURE(BM_matvec_big, T, DType::T) \
      ->ArgsProduct({{1, 2}, {0, 1}})           \
      ->ArgNames({"threads", "huge"})           \
      ->UseRealTime();
WEFT_MATVEC_BIG(Q4_0)
WEFT_MATVEC_BIG(Q4_1)
WEFT_MATVEC_BIG(Q5_0)
WEFT_MATVEC_BIG(Q5_1)
WEFT_MATVEC_BIG(Q8_0)
WEFT_MATVEC_BIG(Q4_K)
WEFT_MATVEC_BIG(Q5_K)
WEFT_MATVEC_BIG(Q6_K)
WEFT_MATVEC_BIG(Q3_K)
WEFT_MATVEC_BIG(IQ4_NL)
WEFT_MATVEC_BIG(MXFP4)

// The decode kernel on rows that stay in L2 (the first 256 rows, 144-420 KiB by type), one
// thread: what it can consume when memory is not the limit. Against BM_read/1 it tells whether a
// type's decode can keep up with the weight stream at all (the arithmetic per byte must fit in the
// time the byte takes to arrive, with room for the overlap). BM_gemm_hot: the same rows times a
// batch of tokens (the prompt path: the panel GEMM where the type has one), its tokens/s what the
// GEMM's arithmetic allows.
void hot_matmul(benchmark::State& state, DType type, int64_t n_tokens) {
  const BigMatrix big(type, true);
  constexpr int64_t kRows = 256;
  const kernels::WeightMatrix part = big.rows(0, kRows);
  std::vector<float> x(BigMatrix::kCols * n_tokens, 0.5f), y(kRows * n_tokens);
  ThreadPool pool(1);
  kernels::MatmulScratch scratch;
  // Once: the weights are timed.
  kernels::prepare_activations(part, x.data(), BigMatrix::kCols, n_tokens, pool, scratch);
  for (auto _ : state) {
    kernels::matmul_prepared(part, x.data(), BigMatrix::kCols, n_tokens, y.data(), kRows, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * big.bytes() / big.matrix().rows * kRows);
  if (n_tokens > 1)
    state.counters["tokens/s"] =
        benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(big.label());
}
void BM_matvec_hot(benchmark::State& state, DType type) { hot_matmul(state, type, 1); }
void BM_gemm_hot(benchmark::State& state, DType type) { hot_matmul(state, type, state.range(0)); }
#define WEFT_MATVEC_HOT(T) BENCHMARK_CAPTURE(BM_matvec_hot, T, DType::T);
WEFT_MATVEC_HOT(Q4_0)
WEFT_MATVEC_HOT(Q4_1)
WEFT_MATVEC_HOT(Q5_0)
WEFT_MATVEC_HOT(Q5_1)
WEFT_MATVEC_HOT(Q8_0)
WEFT_MATVEC_HOT(Q4_K)
WEFT_MATVEC_HOT(Q5_K)
WEFT_MATVEC_HOT(Q6_K)
WEFT_MATVEC_HOT(Q3_K)
WEFT_MATVEC_HOT(Q2_K)
WEFT_MATVEC_HOT(IQ4_NL)
WEFT_MATVEC_HOT(IQ4_XS)
WEFT_MATVEC_HOT(MXFP4)
#define WEFT_GEMM_HOT(T) BENCHMARK_CAPTURE(BM_gemm_hot, T, DType::T)->Arg(8)->Arg(128)->ArgName("tokens");
WEFT_GEMM_HOT(Q4_0)
WEFT_GEMM_HOT(IQ4_NL)
WEFT_GEMM_HOT(MXFP4)

// A prompt's activations converted for the GEMM (quantized per token, then spread into blocks
// across tokens), as every matmul input is once per step: 128 tokens of 2048 columns, one thread.
void BM_prepare_act(benchmark::State& state, DType type) {
  const int64_t cols = 2048, n_tokens = 128;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(cols * n_tokens);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> w(row_bytes(type, cols) * 16);
  kernels::WeightMatrix m{type, w.data(), 16, cols, row_bytes(type, cols)};
  ThreadPool pool(1);
  kernels::MatmulScratch scratch;
  for (auto _ : state) {
    kernels::prepare_activations(m, x.data(), cols, n_tokens, pool, scratch);
    benchmark::DoNotOptimize(scratch.act.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_prepare_act, Q4_0, DType::Q4_0)->UseRealTime();
BENCHMARK_CAPTURE(BM_prepare_act, Q4_K, DType::Q4_K)->UseRealTime();

// Decode over matrices of part rows (Q4_0, 2048 columns) one matmul each, the whole big matrix per
// iteration: how much of the stream a small matrix (an expert's 768 rows, a k/v projection's 512)
// loses to its op's start and end (the pool's wake, the threads' imbalance, prefetch ramp-up).
void BM_matvec_parts(benchmark::State& state) { big_matmul(state, BigMatrix(DType::Q4_0, true), 1, state.range(1)); }
BENCHMARK(BM_matvec_parts)->ArgsProduct({{1, 2}, {256, 768, 2048, 5632}})->ArgNames({"threads", "rows"})->UseRealTime();

// The same matrix times a small batch of tokens (batched decode: one weight read serves every
// sequence): tokens/s against the prompt path's (128) shows what a small batch loses, and
// bytes_per_second against BM_read whether the weight stream still overlaps the arithmetic.
void BM_gemm_big(benchmark::State& state) {
  // An FFN-sized matrix at a time, as a model's step runs them: the outputs stay in cache while
  // the weights stream from DRAM.
  big_matmul(state, BigMatrix(DType::Q4_0, true), state.range(1), 5632);
}
BENCHMARK(BM_gemm_big)->ArgsProduct({{1, 2}, {2, 4, 8, 16, 32, 128}})->ArgNames({"threads", "tokens"})->UseRealTime();

#define WEFT_MATMUL_BENCH(T)                                                     \
  void BM_matvec_##T(benchmark::State& s) { matmul_bench(s, DType::T, 1); }      \
  BENCHMARK(BM_matvec_##T)->Arg(1)->Arg(2)->UseRealTime();                       \
  void BM_matmul32_##T(benchmark::State& s) { matmul_bench(s, DType::T, 32); }   \
  BENCHMARK(BM_matmul32_##T)->Arg(1)->Arg(2)->UseRealTime();                     \
  void BM_matmul128_##T(benchmark::State& s) { matmul_bench(s, DType::T, 128); } \
  BENCHMARK(BM_matmul128_##T)->Arg(1)->Arg(2)->UseRealTime();                    \
  void BM_matmul4_##T(benchmark::State& s) { matmul_bench(s, DType::T, 4); }     \
  BENCHMARK(BM_matmul4_##T)->Arg(1)->UseRealTime();

WEFT_MATMUL_BENCH(Q4_0)
WEFT_MATMUL_BENCH(Q8_0)
WEFT_MATMUL_BENCH(Q4_K)
WEFT_MATMUL_BENCH(Q6_K)
WEFT_MATMUL_BENCH(F16)
WEFT_MATMUL_BENCH(Q5_K)
WEFT_MATMUL_BENCH(Q5_0)

// n_caches copies of one K/V cache in type `cache`, back to back (cache_bytes apart).
std::vector<uint8_t> attention_caches(const std::vector<float>& kv, DType cache, int64_t n_caches,
                                      size_t* cache_bytes) {
  *cache_bytes = row_bytes(cache, static_cast<int64_t>(kv.size()));
  std::vector<uint8_t> caches(*cache_bytes * n_caches);
  for (int64_t c = 0; c < n_caches; ++c) {
    uint8_t* dst = caches.data() + *cache_bytes * c;
    if (cache == DType::F16)
      kernels::f32_to_f16_row(kv.data(), reinterpret_cast<uint16_t*>(dst), static_cast<int64_t>(kv.size()));
    else
      std::memcpy(dst, kv.data(), *cache_bytes);
  }
  return caches;
}

// One layer's attention at a deep context, the 500m preset's heads (32 q, 8 kv, head_dim 64), one
// thread. Decode (one token) reads the whole K/V cache, so its bytes_per_second against BM_read/1
// is its roofline; a prompt chunk is compute bound (FLOP/s counter: 4 per q head, key and dim).
// Args: positions in the cache, cache type (0 f32, 1 f16), tokens, caches.
void BM_attention(benchmark::State& state) {
  const int64_t n_pos = state.range(0), n_tokens = state.range(2), n_q = 32, n_kv = 8, hd = 64;
  // Caches, one per call: with many, each call reads its cache from DRAM as a batched decode step
  // does (16 sequences x 8 layers of 160 positions are 40 MiB of f16 cache).
  const int64_t n_caches = state.range(3);
  const DType cache = state.range(1) ? DType::F16 : DType::F32;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(n_tokens * n_q * hd), out(q.size()), kv(n_pos * n_kv * hd);
  for (auto& v : q) v = nd(rng);
  for (auto& v : kv) v = nd(rng);
  size_t cache_bytes = 0;
  const std::vector<uint8_t> caches = attention_caches(kv, cache, n_caches, &cache_bytes);
  std::vector<int32_t> kv_of_q(n_q), pos(n_tokens);
  for (int64_t h = 0; h < n_q; ++h) kv_of_q[h] = static_cast<int32_t>(h / (n_q / n_kv));
  for (int64_t t = 0; t < n_tokens; ++t) pos[t] = static_cast<int32_t>(n_pos - n_tokens + t);
  kernels::AttentionShape s{n_tokens, n_q, n_kv, hd, 0.125f};
  s.k_type = s.v_type = cache;
  s.n_ctx = n_pos;
  int64_t c = 0;
  for (auto _ : state) {
    const uint8_t* k = caches.data() + cache_bytes * c;
    c = (c + 1) % n_caches;
    kernels::attention(s, q.data(), k, k, kv_of_q.data(), pos.data(), out.data());  // V = K: same bytes read
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * static_cast<int64_t>(cache_bytes));
  double keys = 0;
  for (int32_t p : pos) keys += p + 1;
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * keys * n_q * hd * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(cache)) + " cache, " + kernels::isa_name(kernels::ops_kernels().isa));
}
BENCHMARK(BM_attention)
    ->ArgsProduct({{160, 512, 4096}, {0, 1}, {1}, {1}})
    ->ArgsProduct({{160}, {1}, {1}, {128}})
    ->Args({3200, 1, 128, 1})
    ->Args({3200, 0, 128, 1})
    ->ArgNames({"pos", "f16", "tokens", "caches"})
    ->UseRealTime();

// Gemma 4 E2B's attention, one thread: 8 q heads over one kv head, scores unscaled over q and k of
// unit RMS (as its head norms leave them), so they spread by hundreds at heads of 512. f16 cache.
// Args: head_dim, tokens (at positions 0..tokens-1, or one token at position 511).
void BM_attention_unscaled(benchmark::State& state) {
  const int64_t hd = state.range(0), n_tokens = state.range(1), n_q = 8, n_pos = 512;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(n_tokens * n_q * hd), out(q.size()), kv(n_pos * hd);
  for (auto& v : q) v = nd(rng);
  for (auto& v : kv) v = nd(rng);
  size_t cache_bytes = 0;
  const std::vector<uint8_t> cache = attention_caches(kv, DType::F16, 1, &cache_bytes);
  std::vector<int32_t> kv_of_q(n_q, 0), pos(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) pos[t] = static_cast<int32_t>(n_tokens == 1 ? n_pos - 1 : t);
  kernels::AttentionShape s{n_tokens, n_q, 1, hd, 1.f};
  s.k_type = s.v_type = DType::F16;
  s.n_ctx = n_pos;
  for (auto _ : state) {
    kernels::attention(s, q.data(), cache.data(), cache.data(), kv_of_q.data(), pos.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  double keys = 0;
  for (int32_t p : pos) keys += p + 1;
  state.counters["FLOP/s"] =
      benchmark::Counter(4.0 * keys * n_q * hd * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(kernels::isa_name(kernels::ops_kernels().isa));
}
BENCHMARK(BM_attention_unscaled)->ArgsProduct({{256, 512}, {1, 128}})->ArgNames({"hd", "tokens"})->UseRealTime();

// Gated DeltaNet's recurrence over one value head's tokens (Qwen 3.5's heads of 128, rows as a
// step holds them: 8 key and 16 value heads a token), one thread: token by token, or chunked
// (kernels::delta_chunk). FLOP/s counts the recurrence's 3 n^2 multiply-adds a token, whichever
// form runs. Args: tokens, chunked.
void BM_delta_rule(benchmark::State& state) {
  constexpr int64_t n = 128, qk_stride = 8 * n, v_stride = 16 * n;
  const int64_t tokens = state.range(0);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> q(tokens * qk_stride), k(q.size()), v(tokens * v_stride), out(v.size()), s(n * n, 0.f);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = u(rng) / std::sqrt(static_cast<float>(n));
  std::vector<kernels::DeltaGates> gates;
  for (int64_t t = 0; t < tokens; ++t) gates.push_back(kernels::delta_gates(u(rng), u(rng), -0.5f, 0.f));
  for (auto _ : state) {
    kernels::delta_rule(s.data(), n, tokens, q.data(), k.data(), v.data(), qk_stride, v_stride, gates.data(), 1,
                        out.data(), state.range(1) != 0);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(6.0 * n * n * tokens * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(kernels::isa_name(kernels::ops_kernels().isa));
}
BENCHMARK(BM_delta_rule)->ArgsProduct({{64, 512}, {0, 1}})->ArgNames({"tokens", "chunked"})->UseRealTime();

}  // namespace
