// A session's connection after the handshake: the socket plus its SessionMac. With a key every
// frame is {header, payload, 16-byte tag} and a frame whose tag fails ends the session; without one
// (loopback-only unauthenticated mode) frames are as in frame.h. Both the coordinator
// (RemoteDevice) and the worker (WorkerServer) send and receive session frames only through here.
#pragma once

#include "net/frame.h"
#include "net/session_mac.h"
#include "net/socket.h"

#include <array>

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
  // One frame whose payload is the concatenation of parts, sent in place (weights from the model
  // mapping: no joining copy).
  void send_parts(MsgType t, std::span<const std::span<const uint8_t>> parts, int timeout_ms);
  Frame recv(int header_timeout_ms, int body_timeout_ms);
  // A frame in two calls, for payloads received straight into their final place: the header
  // (returns the payload length), then the payload scattered over parts (their sizes add up to
  // that length), checked against its tag.
  uint32_t recv_header(MsgType& type, int timeout_ms);
  void recv_payload_into(std::span<const std::span<uint8_t>> parts, int timeout_ms);
  // recv that also requires the type; an Error frame from the peer is rethrown with its text.
  Frame expect(MsgType want, int header_timeout_ms, int body_timeout_ms);

 private:
  Socket s_;
  SessionMac mac_;
  std::array<uint8_t, kFrameHeaderBytes> header_{};  // of the frame recv_header began
  uint32_t pending_ = 0;                             // its payload length, until recv_payload_into
  bool in_frame_ = false;
};

}  // namespace weft::net
