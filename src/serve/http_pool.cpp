#include "serve/http_pool.h"

#include "core/error.h"

namespace weft::serve {

HttpPool::HttpPool(int max_threads) : max_threads_(max_threads) { WEFT_ASSERT(max_threads > 0); }

HttpPool::~HttpPool() { shutdown(); }

void HttpPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (stop_) return;
  tasks_.push_back(std::move(fn));
  // Each waiting thread takes one queued task: a task beyond them needs a thread of its own.
  if (static_cast<size_t>(waiting_) >= tasks_.size())
    cv_.notify_one();
  else if (static_cast<int>(threads_.size()) < max_threads_)
    threads_.emplace_back([this] { work(); });
}

void HttpPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

int HttpPool::threads() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(threads_.size());
}

void HttpPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    while (tasks_.empty() && !stop_) {
      ++waiting_;
      cv_.wait(lock);
      --waiting_;
    }
    if (tasks_.empty()) return;  // stopping, nothing left to run
    auto fn = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace weft::serve
