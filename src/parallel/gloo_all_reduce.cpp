#include "parallel/gloo_all_reduce.h"

#include "core/error.h"
#include "parallel/shm_barrier.h"

#include <gloo/context.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace weft::parallel {

SyncAllReduce::SyncAllReduce(std::shared_ptr<gloo::Context> ctx, size_t chunk_bytes, std::vector<int> spin_fds)
    : ctx_(std::move(ctx)), rank_(ctx_->rank), size_(ctx_->size), chunk_bytes_(chunk_bytes) {
  WEFT_ASSERT(chunk_bytes_ >= 16);
  for (int fd : spin_fds) spin_fds_.push_back({fd, POLLIN, 0});
  out_.resize(chunk_bytes_);
  in_.resize(size_);
  to_.resize(size_);
  from_.resize(size_);
  // One slot per ordered pair (a -> b), drawn in the same order on every rank, so that a's send
  // buffer and b's receive buffer name the same slot.
  for (int a = 0; a < size_; ++a)
    for (int b = 0; b < size_; ++b) {
      if (a == b) continue;
      const int slot = ctx_->nextSlot();
      if (a == rank_) to_[b] = ctx_->getPair(b)->createSendBuffer(slot, out_.data(), out_.size());
      if (b == rank_) {
        in_[a].resize(chunk_bytes_);
        from_[a] = ctx_->getPair(a)->createRecvBuffer(slot, in_[a].data(), in_[a].size());
      }
    }
}

SyncAllReduce::~SyncAllReduce() = default;

void SyncAllReduce::run(void* data, size_t n, size_t elem_bytes, AddFn add) {
  if (size_ == 1 || n == 0) return;
  WEFT_ASSERT(elem_bytes > 0 && elem_bytes <= chunk_bytes_);
  auto* bytes = static_cast<uint8_t*>(data);
  if (n * elem_bytes <= chunk_bytes_) return one_shot(bytes, n, elem_bytes, add);
  const int r = rank_, N = size_;
  for (int s = 0; s + 1 < N; ++s)  // reduce-scatter: this rank ends owning segment r + 1
    ring_step(bytes, segment(n, (r - s + N) % N), segment(n, (r - s - 1 + N) % N), elem_bytes, add);
  for (int s = 0; s + 1 < N; ++s)  // all-gather: each owner's segment goes round
    ring_step(bytes, segment(n, (r + 1 - s + N) % N), segment(n, (r - s + N) % N), elem_bytes, nullptr);
}

void SyncAllReduce::one_shot(uint8_t* data, size_t n, size_t elem_bytes, AddFn add) {
  const size_t len = n * elem_bytes;
  std::memcpy(out_.data(), data, len);
  for (int k = 1; k < size_; ++k) {  // peers in rank order after this one, so no peer is everyone's first
    const int p = (rank_ + k) % size_;
    to_[p]->send(0, len);
    to_[p]->waitSend();
  }
  for (int k = 1; k < size_; ++k) receive((rank_ + size_ - k) % size_);
  // Rank order, on every rank: the same sum to the last bit. out_ is free again (sent).
  auto contribution = [&](int q) { return q == rank_ ? data : in_[q].data(); };
  std::memcpy(out_.data(), contribution(0), len);
  for (int q = 1; q < size_; ++q) add(out_.data(), contribution(q), n);
  std::memcpy(data, out_.data(), len);
}

void SyncAllReduce::ring_step(uint8_t* data, Segment send, Segment recv, size_t elem_bytes, AddFn add) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  const size_t per = chunk_bytes_ / elem_bytes;  // elements per message
  const size_t n_send = (send.count + per - 1) / per, n_recv = (recv.count + per - 1) / per;
  for (size_t c = 0; c < std::max(n_send, n_recv); ++c) {
    if (c < n_send) {
      const size_t count = std::min(per, send.count - c * per);
      std::memcpy(out_.data(), data + (send.offset + c * per) * elem_bytes, count * elem_bytes);
      to_[right]->send(0, count * elem_bytes);
      to_[right]->waitSend();
    }
    if (c < n_recv) {
      const size_t count = std::min(per, recv.count - c * per);
      receive(left);
      uint8_t* dst = data + (recv.offset + c * per) * elem_bytes;
      if (add)
        add(dst, in_[left].data(), count);
      else
        std::memcpy(dst, in_[left].data(), count * elem_bytes);
    }
  }
}

void SyncAllReduce::receive(int peer) {
  if (!spin_fds_.empty()) {
    const auto deadline = std::chrono::steady_clock::now() + ShmBarrier::kSpinTime;
    while (::poll(spin_fds_.data(), spin_fds_.size(), 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    }
  }
  from_[peer]->waitRecv();  // blocking read (with the group's timeout) of what is there or comes
}

SyncAllReduce::Segment SyncAllReduce::segment(size_t n, int index) const {
  const size_t N = static_cast<size_t>(size_), i = static_cast<size_t>(index);
  const size_t begin = n * i / N, end = n * (i + 1) / N;
  return {begin, end - begin};
}

}  // namespace weft::parallel
