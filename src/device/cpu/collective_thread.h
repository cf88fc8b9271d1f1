// A thread that runs a device's collectives in the order they are submitted, while the device's
// own thread computes: what lets a prompt's all-reduce of one chunk of tokens travel while the
// next chunk's matmul runs (CpuGraphRunner::matmul). Only one thread uses the group at a time:
// the device submits, then waits for all of them before its next collective of its own.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace weft::device {

class CollectiveThread {
 public:
  CollectiveThread() : thread_([this] { loop(); }) {}
  ~CollectiveThread() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
  }
  CollectiveThread(const CollectiveThread&) = delete;
  CollectiveThread& operator=(const CollectiveThread&) = delete;

  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
      ++pending_;
    }
    cv_.notify_all();
  }

  // Until every submitted job has run; rethrows the first failure (the jobs after it are skipped).
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      if (!error_) {
        lock.unlock();
        try {
          job();
        } catch (...) {
          lock.lock();
          error_ = std::current_exception();
          lock.unlock();
        }
        lock.lock();
      }
      --pending_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  int pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::jthread thread_;  // last: joined before the members it uses go
};

}  // namespace weft::device
