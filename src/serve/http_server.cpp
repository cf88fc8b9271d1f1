#include "serve/http_server.h"

#include "serve/connection_stream.h"

#include <sys/socket.h>
#include <unistd.h>

namespace weft::serve {

namespace {

// Each wait to read or write (httplib's default read and write timeouts).
constexpr int kIoTimeoutMs = 5000;
// A body the gate did not wait for (over kGateBodyBytes) must arrive within this: 8 MiB at 2 Mbit/s.
constexpr int kBodyTimeoutMs = 40000;

// httplib's accept loop hands each socket to a task queue; the gate takes it at once.
class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

HttpServer::HttpServer(int max_threads) : pool_(max_threads) {
  new_task_queue = [] { return new InlineQueue; };
}

HttpServer::~HttpServer() { close_connections(); }

void HttpServer::raise_backlog(int n) { ::listen(svr_sock_, n); }

void HttpServer::start_gate(GateOptions opt, RequestGate::Refused refused) {
  gate_ = std::make_unique<RequestGate>(
      std::move(opt), [this](int fd, const Head& head) { pool_.enqueue([this, fd, head] { serve(fd, head); }); },
      std::move(refused));
}

void HttpServer::drain() {
  draining_ = true;
  if (gate_) gate_->drain();
}

void HttpServer::close_connections() {
  if (gate_) gate_->stop();  // no more hand-offs; what workers hand back is closed
  pool_.shutdown();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (gate_)
    gate_->admit(sock);
  else
    ::close(sock);
  return true;
}

void HttpServer::serve(int fd, const Head& head) {
  ConnectionScope scope(fd);
  ConnectionStream strm(fd, head.head_bytes + head.content_length,
                        Clock::now() + std::chrono::milliseconds(kBodyTimeoutMs), kIoTimeoutMs);
  bool closed = false;
  ++in_flight_;
  const bool ok = process_request(strm, /*close_connection=*/draining_, closed, nullptr);
  --in_flight_;
  // Bytes of this request left unread (a refusal before its body) would read as the next request.
  if (ok && !closed && !draining_ && strm.unread() == 0)
    gate_->resume(fd);
  else
    gate_->linger(fd);
}

}  // namespace weft::serve
