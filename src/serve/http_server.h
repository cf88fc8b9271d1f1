// httplib's server with connections handled here rather than by httplib's per-connection loop:
// each accepted socket waits in the RequestGate (one thread) for a request head, which is judged
// before any body is read; a worker of the HttpPool then has httplib serve that one request over a
// ConnectionStream bounded to the request's own bytes, and hands the connection back to the gate
// to wait for the next one (keep-alive), so an idle connection holds no thread.
#pragma once

#include "serve/http_pool.h"
#include "serve/request_gate.h"

#include <httplib.h>

#include <atomic>
#include <memory>

namespace weft::serve {

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(int max_threads);
  ~HttpServer() override;

  // listen() again on a listening socket sets the new backlog (httplib 0.11 listens with 5).
  void raise_backlog(int n);
  // Before listen_after_bind(): the port is known then.
  void start_gate(GateOptions opt, RequestGate::Refused refused);
  // New requests are refused (503) and no connection is kept alive; those in progress go on.
  void drain();
  int in_flight() const { return in_flight_; }
  // After httplib's stop() has ended the accept loop: ends the workers and closes every connection.
  void close_connections();

 private:
  bool process_and_close_socket(socket_t sock) override;  // the accept loop's hand-off
  void serve(int fd, const Head& head);

  HttpPool pool_;
  std::unique_ptr<RequestGate> gate_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace weft::serve
