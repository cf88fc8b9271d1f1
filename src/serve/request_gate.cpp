#include "serve/request_gate.h"

#include "core/error.h"
#include "serve/connection_stream.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft::serve {

namespace {

constexpr int kSweepMs = 100;            // how often deadlines are looked at
constexpr size_t kMaxLinger = 1024;      // closing connections drained at once; beyond: closed at once
constexpr size_t kDrainBytes = 1 << 20;  // read and dropped per wake-up of a closing connection

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

RequestGate::RequestGate(GateOptions opt, Handoff handoff, Refused refused)
    : opt_(std::move(opt)),
      handoff_(std::move(handoff)),
      refused_(std::move(refused)),
      peek_(kMaxHeadBytes + kGateBodyBytes + 1) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) fail("serve", "cannot create the request gate's epoll: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { loop(); });
}

RequestGate::~RequestGate() {
  stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void RequestGate::post(int fd, Phase phase) {
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      inbox_.emplace_back(fd, phase);
      fd = -1;
    }
  }
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void RequestGate::drain() {
  draining_ = true;
  post(-1, Phase::Idle);  // wakes the loop; fd -1 is skipped
}

void RequestGate::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void RequestGate::loop() {
  std::vector<epoll_event> events(256);
  auto next_sweep = Clock::now();
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepMs);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == wake_fd_) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
      } else if (conns_.count(events[i].data.fd)) {
        on_ready(events[i].data.fd, events[i].events);
      }
    }
    take_inbox();
    {
      std::lock_guard lock(mu_);
      if (stopped_) break;
    }
    if (Clock::now() >= next_sweep) {
      sweep();
      next_sweep = Clock::now() + std::chrono::milliseconds(kSweepMs);
    }
  }
  std::lock_guard lock(mu_);
  for (const auto& [fd, phase] : inbox_)
    if (fd >= 0) ::close(fd);
  inbox_.clear();
  while (!conns_.empty()) close_conn(conns_.begin()->first);
}

void RequestGate::take_inbox() {
  std::vector<std::pair<int, Phase>> items;
  {
    std::lock_guard lock(mu_);
    items.swap(inbox_);
  }
  for (const auto& [fd, phase] : items)
    if (fd >= 0) add(fd, phase);
}

void RequestGate::add(int fd, Phase phase) {
  if (phase == Phase::Idle && draining_) phase = Phase::Linger;
  if (phase == Phase::Linger && n_linger_ >= kMaxLinger) {
    ::close(fd);
    return;
  }
  set_nonblocking(fd);
  Conn& c = conns_[fd];
  c = Conn{peer_address(fd), phase, next_seq_++, {}};
  epoll_event ev{};
  // Edge-triggered: peeked bytes stay in the socket, so readiness is news only when more arrive.
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  if (phase == Phase::Linger) {
    ++n_linger_;
    start_linger(fd, c);
    return;
  }
  c.deadline = Clock::now() + std::chrono::milliseconds(opt_.idle_timeout_ms);
  auto& mine = by_addr_[c.addr];
  // The oldest waiting connection of this address, then of all, makes room.
  if (mine.size() >= opt_.max_per_address) close_conn(waiting_.at(*mine.begin()));
  if (waiting_.size() >= opt_.max_waiting) close_conn(waiting_.begin()->second);
  by_addr_[c.addr].insert(c.seq);
  waiting_.emplace(c.seq, fd);
  n_waiting_ = waiting_.size();
}

void RequestGate::on_ready(int fd, uint32_t events) {
  Conn& c = conns_.at(fd);
  if (c.phase == Phase::Linger) return drain_input(fd);
  look_at_head(fd, c, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
}

void RequestGate::look_at_head(int fd, Conn& c, bool peer_done) {
  const ssize_t n = ::recv(fd, peek_.data(), peek_.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return close_conn(fd);  // closed (or reset) between requests
  if (c.phase == Phase::Idle) {
    c.phase = Phase::Head;
    c.deadline = Clock::now() + std::chrono::milliseconds(opt_.head_timeout_ms);
  }
  const std::string_view bytes(peek_.data(), static_cast<size_t>(n));
  const size_t end = head_end(bytes.substr(0, kMaxHeadBytes));
  if (end == std::string_view::npos) {
    if (bytes.size() >= kMaxHeadBytes)
      return refuse(fd, 431, fmt::format("the request head exceeds {} bytes", kMaxHeadBytes));
    if (peer_done) close_conn(fd);  // the client stopped sending halfway through a head
    return;
  }
  HeadVerdict v = check_head(bytes.substr(0, end), opt_.policy);
  if (v.status == 0 && draining_) v = {503, "the server is shutting down", {}};
  if (v.status != 0) return refuse(fd, v.status, v.message);
  // A small body is waited for here too (a client that stops sending one is let go at the deadline).
  const uint64_t body = v.head.content_length;
  if (body <= kGateBodyBytes && bytes.size() < end + body && !peer_done) return;
  unwait(fd, c);
  conns_.erase(fd);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  handoff_(fd, v.head);
}

void RequestGate::refuse(int fd, int status, const std::string& message) {
  const std::string reply = refusal_response(status, message);
  // Best effort: a refusal fits in an idle socket's send buffer.
  [[maybe_unused]] const ssize_t n = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (refused_) refused_(status);
  Conn& c = conns_.at(fd);
  unwait(fd, c);
  if (n_linger_ >= kMaxLinger) return close_conn(fd);
  ++n_linger_;
  c.phase = Phase::Linger;
  start_linger(fd, c);
}

void RequestGate::start_linger(int fd, Conn& c) {
  ::shutdown(fd, SHUT_WR);
  c.deadline = Clock::now() + std::chrono::milliseconds(opt_.linger_ms);
  drain_input(fd);  // what is already there raises no edge
}

void RequestGate::drain_input(int fd) {
  char buf[16384];
  for (size_t total = 0; total < kDrainBytes;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return close_conn(fd);  // the client's end: done
    total += static_cast<size_t>(n);
  }
}

void RequestGate::sweep() {
  const auto now = Clock::now();
  std::vector<std::pair<int, Phase>> due;
  for (const auto& [fd, c] : conns_)
    if (now >= c.deadline || (draining_ && c.phase == Phase::Idle)) due.emplace_back(fd, c.phase);
  for (const auto& [fd, phase] : due) {
    if (phase == Phase::Head)
      refuse(fd, 408, fmt::format("the request head did not arrive within {} ms", opt_.head_timeout_ms));
    else
      close_conn(fd);  // idle past the keep-alive wait, or done lingering
  }
}

void RequestGate::unwait(int fd, Conn& c) {
  if (c.phase == Phase::Linger) return;
  (void)fd;
  auto it = by_addr_.find(c.addr);
  if (it != by_addr_.end()) {
    it->second.erase(c.seq);
    if (it->second.empty()) by_addr_.erase(it);
  }
  waiting_.erase(c.seq);
  n_waiting_ = waiting_.size();
}

void RequestGate::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  if (it->second.phase == Phase::Linger)
    --n_linger_;
  else
    unwait(fd, it->second);
  conns_.erase(it);
  ::close(fd);  // also leaves the epoll set
}

}  // namespace weft::serve
