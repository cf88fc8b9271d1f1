// The HTTP server's worker threads: each runs one request at a time (HttpServer hands it a
// connection whose head has arrived; idle connections wait in the RequestGate, holding none). A
// fixed pool would stall a new request while long ones (waiting on the model) hold every thread,
// so this one starts a thread whenever a request arrives and none is idle, up to a cap; the
// threads it started stay for later bursts.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::serve {

class HttpPool : public httplib::TaskQueue {
 public:
  explicit HttpPool(int max_threads);
  ~HttpPool() override;  // shutdown()
  HttpPool(const HttpPool&) = delete;
  HttpPool& operator=(const HttpPool&) = delete;

  // Runs fn on a waiting thread; when none is free for it, on a new thread while fewer than
  // max_threads run, else on the first thread to finish its task.
  void enqueue(std::function<void()> fn) override;
  // Runs the tasks already queued, then joins every thread.
  void shutdown() override;

  int threads() const;  // started so far

 private:
  void work();

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int waiting_ = 0;  // threads waiting for a task
  bool stop_ = false;
};

}  // namespace weft::serve
