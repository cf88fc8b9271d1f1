#include "core/stream_read.h"

#include "core/error.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace weft {

size_t last_level_cache_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? size_t(l3) : 0;
}

size_t dram_stream_bytes() { return std::max(size_t{256} << 20, last_level_cache_bytes() * 8); }

StreamRead::StreamRead(int threads, size_t bytes, int windows)
    : pool_(threads, {}, /*spin=*/false), windows_(std::max(windows, 1)) {
  window_words_ = bytes / size_t(windows_) / 4096 * 512;
  if (window_words_ == 0) fail("core", "stream read: {} bytes is less than {} pages", bytes, windows_);
  buffer_ = HugeBuffer(window_words_ * 8 * size_t(windows_), "core", "the stream read's buffer");
  std::fill_n(reinterpret_cast<uint64_t*>(buffer_.data()), window_words_ * size_t(windows_), uint64_t{3});
  sums_.assign(size_t(pool_.size()) * 8, 0);
}

double StreamRead::read() {
  const uint64_t* src = reinterpret_cast<const uint64_t*>(buffer_.data()) + size_t(next_) * window_words_;
  next_ = (next_ + 1) % windows_;
  const auto t0 = std::chrono::steady_clock::now();
  pool_.run([&](int ith, int nth) {
    auto [b, e] = split_range(static_cast<int64_t>(window_words_), 512, ith, nth);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = b; i + 3 < e; i += 4) s0 += src[i], s1 += src[i + 1], s2 += src[i + 2], s3 += src[i + 3];
    sums_[size_t(ith) * 8] = s0 + s1 + s2 + s3;
  });
  return double(window_bytes()) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace weft
