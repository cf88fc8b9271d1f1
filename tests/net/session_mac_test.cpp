// Session frame MACs: both sides' keys match, and a tampered, replayed or cross-direction frame is
// rejected, both on SessionMac itself and through a Channel over loopback (raw bytes written on the
// socket, as a man in the middle would).
#include "net/session_mac.h"
#include "core/error.h"
#include "net/channel.h"
#include "net/handshake.h"
#include "net/wire.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <array>
#include <future>

namespace weft::net {
namespace {

const std::vector<uint8_t> kKey(20, 'k'), kNc(kNonceBytes, 1), kNw(kNonceBytes, 2);

std::array<uint8_t, kFrameHeaderBytes> header(MsgType t, uint32_t len) {
  ByteWriter w;
  w.u32(kFrameMagic << 16 | static_cast<uint32_t>(t));
  w.u32(len);
  std::array<uint8_t, kFrameHeaderBytes> h;
  std::copy(w.data().begin(), w.data().end(), h.begin());
  return h;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SessionMac, TamperedReplayedOrReflectedFramesFail) {
  SessionMac c(kKey, kNc, kNw, Role::Coordinator), w(kKey, kNc, kNw, Role::Worker);
  const std::vector<uint8_t> payload = {1, 2, 3, 4};
  const auto h = header(MsgType::Step, 4);
  const MacTag t0 = c.sign(h, payload);
  EXPECT_NO_THROW(w.verify(h, payload, t0, "peer"));
  // Replay of frame 0 as frame 1.
  EXPECT_NE(error_of([&] { w.verify(h, payload, t0, "peer"); }).find("failed authentication"), std::string::npos);
  SessionMac c2(kKey, kNc, kNw, Role::Coordinator), w2(kKey, kNc, kNw, Role::Worker);
  auto bad = payload;
  bad[2] ^= 1;
  EXPECT_ERROR(w2.verify(h, bad, c2.sign(h, payload), "peer"), "failed authentication (tampered");  // tampered payload
  SessionMac c3(kKey, kNc, kNw, Role::Coordinator), c4(kKey, kNc, kNw, Role::Coordinator);
  EXPECT_ERROR(c4.verify(h, payload, c3.sign(h, payload), "peer"),
               "failed authentication (tampered");  // reflected back to its sender
  SessionMac other(kKey, kNc, std::vector<uint8_t>(kNonceBytes, 3), Role::Worker),
      c5(kKey, kNc, kNw, Role::Coordinator);
  EXPECT_ERROR(other.verify(h, payload, c5.sign(h, payload), "peer"),
               "failed authentication (tampered");  // from another session
}

// Connected loopback sockets.
std::pair<Socket, Socket> socket_pair() {
  Listener l({"127.0.0.1", 0});
  Socket a = connect_tcp({"127.0.0.1", l.port()}, 2000);
  Socket b = l.accept(2000);
  return {std::move(a), std::move(b)};
}

// The bytes a channel puts on the wire for one frame.
std::vector<uint8_t> wire_bytes(Channel& ch, Socket& far, MsgType t, const std::vector<uint8_t>& payload) {
  ch.send(t, payload, 1000);
  std::vector<uint8_t> b(kFrameHeaderBytes + payload.size() + kMacTagBytes);
  far.recv_exact(b.data(), b.size(), 1000);
  return b;
}

TEST(Channel, TamperedAndReplayedFramesOnTheWireAreRejected) {
  auto [c_sock, recorder] = socket_pair();
  auto [attacker, w_sock] = socket_pair();
  Channel coordinator(std::move(c_sock), SessionMac(kKey, kNc, kNw, Role::Coordinator));
  Channel worker(std::move(w_sock), SessionMac(kKey, kNc, kNw, Role::Worker));
  ByteWriter p;
  p.i32(7);
  const auto good = wire_bytes(coordinator, recorder, MsgType::Step, p.data());
  attacker.send_all(good.data(), good.size(), 1000);
  EXPECT_EQ(worker.recv(1000, 1000).payload, p.data());
  // The same bytes again: a replay.
  attacker.send_all(good.data(), good.size(), 1000);
  const std::string replay = error_of([&] { worker.recv(1000, 1000); });
  EXPECT_NE(replay.find("step frame #1 failed authentication"), std::string::npos) << replay;

  auto [c2, rec2] = socket_pair();
  auto [att2, w2] = socket_pair();
  Channel coordinator2(std::move(c2), SessionMac(kKey, kNc, kNw, Role::Coordinator));
  Channel worker2(std::move(w2), SessionMac(kKey, kNc, kNw, Role::Worker));
  auto tampered = wire_bytes(coordinator2, rec2, MsgType::Step, p.data());
  tampered[kFrameHeaderBytes] ^= 0x40;  // the position 7 becomes 71
  att2.send_all(tampered.data(), tampered.size(), 1000);
  const std::string e = error_of([&] { worker2.recv(1000, 1000); });
  EXPECT_NE(e.find("failed authentication"), std::string::npos) << e;
}

TEST(Channel, HandshakeKeysTheChannelBothWaysOrLeavesItPlain) {
  for (const std::vector<uint8_t>& key : {kKey, std::vector<uint8_t>{}}) {
    Listener l({"127.0.0.1", 0});
    auto server = std::async(std::launch::async, [&] {
      Socket s = l.accept(3000);
      SessionMac m = server_handshake(s, key);
      return Channel(std::move(s), std::move(m));
    });
    Socket c = connect_tcp({"127.0.0.1", l.port()}, 3000);
    SessionMac m = client_handshake(c, key);
    Channel cc(std::move(c), std::move(m));
    Channel sc = server.get();
    EXPECT_EQ(cc.authenticated(), !key.empty());
    const std::vector<uint8_t> big(200000, 9);  // over the coalescing size: header, payload, tag sent apart
    for (int i = 0; i < 3; ++i) {
      cc.send(MsgType::Step, big, 2000);
      EXPECT_EQ(sc.expect(MsgType::Step, 2000, 2000).payload, big);
      sc.send(MsgType::Heartbeat, {}, 2000);
      EXPECT_TRUE(cc.expect(MsgType::Heartbeat, 2000, 2000).payload.empty());
    }
  }
}

}  // namespace
}  // namespace weft::net
