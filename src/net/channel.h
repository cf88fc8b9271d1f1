// A session's connection after the handshake: the socket plus its SessionMac. With a key every
// frame is {header, payload, 16-byte tag} and a frame whose tag fails ends the session; without one
// (loopback-only unauthenticated mode) frames are as in frame.h. Both the coordinator
// (RemoteDevice) and the worker (WorkerServer) send and receive session frames only through here.
#pragma once

#include "net/frame.h"
#include "net/session_mac.h"
#include "net/socket.h"

namespace weft::net {

class Channel {
 public:
  Channel() = default;
  Channel(Socket s, SessionMac mac) : s_(std::move(s)), mac_(std::move(mac)) {}

  Socket& socket() { return s_; }
  const Socket& socket() const { return s_; }
  const std::string& peer() const { return s_.peer(); }
  bool valid() const { return s_.valid(); }
  void close() { s_.close(); }
  bool authenticated() const { return mac_.enabled(); }

  // Not thread-safe: one sender and one receiver at a time (callers hold their own locks).
  void send(MsgType t, std::span<const uint8_t> payload, int timeout_ms);
  Frame recv(int header_timeout_ms, int body_timeout_ms);
  // recv that also requires the type; an Error frame from the peer is rethrown with its text.
  Frame expect(MsgType want, int header_timeout_ms, int body_timeout_ms);

 private:
  Socket s_;
  SessionMac mac_;
};

}  // namespace weft::net
