#include "device/group_member.h"

#include "parallel/gloo_group.h"

#include <cstring>
#include <utility>

namespace weft::device {

GroupMember::~GroupMember() {
  if (joining_.joinable()) joining_.join();
}

void GroupMember::begin(GroupJoin j) {
  if (j.shared) {
    group_ = std::move(j.shared);
    return;
  }
  joining_ = std::thread([this, j = std::move(j)] {
    try {
      const NetworkGroup& g = j.net;
      group_ = parallel::make_gloo_group(
          j.rank, j.size, j.wire,
          {g.store, g.prefix, g.host, g.timeout_ms, g.busy_poll, parallel::kSyncChunkBytes, g.store_key, g.host_shm});
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

std::exception_ptr GroupMember::finish() {
  if (joining_.joinable()) joining_.join();
  return std::exchange(error_, nullptr);
}

void all_gather_rows(parallel::Group& g, const float* in, const std::vector<parallel::Range>& ranges, int64_t n_tokens,
                     int64_t width, std::vector<float>& tmp, float* out) {
  std::vector<size_t> counts;
  size_t total = 0;
  for (const auto& r : ranges) {
    counts.push_back(static_cast<size_t>(r.size() * n_tokens));
    total += counts.back();
  }
  tmp.resize(total);
  g.all_gather(in, counts, tmp.data());
  size_t off = 0;  // rank-major [rank][token][slice] -> [token][features]
  for (const auto& r : ranges) {
    for (int64_t t = 0; t < n_tokens; ++t)
      std::memcpy(out + t * width + r.begin, tmp.data() + off + t * r.size(), r.size() * sizeof(float));
    off += r.size() * n_tokens;
  }
}

}  // namespace weft::device
