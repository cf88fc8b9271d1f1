// The thread a local device computes on: load and steps run there one at a time, so a device's
// state (a thread pool pinned to its cores, a GPU's command buffer) belongs to one thread. A step
// is started (start) and later polled or waited for; load-time work is called and waited for.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace weft::device {

class JobThread {
 public:
  // on_exit runs on the thread as it ends (what the thread owns is released there).
  explicit JobThread(std::function<void()> on_exit = {}) : on_exit_(std::move(on_exit)) {
    thread_ = std::thread([this] { main(); });
  }
  ~JobThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

  // Starts job; false (and nothing started) while another runs.
  bool start(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      if (!done_) return false;
      job_ = std::move(job);
      done_ = false;
    }
    cv_.notify_all();
    return true;
  }
  // Whether no job runs, waiting up to timeout for the current one.
  bool poll(int timeout_ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; });
  }
  // Waits for the current job; its exception (if it threw), taken.
  std::exception_ptr wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return std::exchange(error_, nullptr);
  }
  // start then wait.
  std::exception_ptr call(std::function<void()> job) {
    wait();
    start(std::move(job));
    return wait();
  }

 private:
  void main() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !done_; });
      if (stop_) {
        lock.unlock();
        if (on_exit_) on_exit_();
        return;
      }
      auto job = std::move(job_);
      lock.unlock();
      std::exception_ptr err;
      try {
        job();
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      error_ = err;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::function<void()> on_exit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = true, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace weft::device
