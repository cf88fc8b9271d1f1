// The HTTP server's threads. httplib runs each connection on one pool thread for its whole life,
// its idle keep-alive waits included (up to 5 s), so a fixed pool stalls a new connection while
// idle ones hold every thread: a client that opens more connections than there are threads (node's
// fetch does, when its pooled connections have not yet been released) waits seconds for a reply
// it could have had at once. This pool starts a thread whenever a connection arrives and none is
// idle, up to a cap; the threads it started stay for later bursts.
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
