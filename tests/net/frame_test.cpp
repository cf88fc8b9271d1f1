// Wire codec and frames: round trips of every field kind, and rejection of bad headers, oversized
// lengths, truncated payloads and trailing bytes.
#include "net/frame.h"
#include "core/error.h"
#include "net/wire.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <array>
#include <thread>

namespace weft::net {
namespace {

TEST(Wire, RoundTripsEveryFieldKindLittleEndian) {
  ByteWriter w;
  w.u8(7);
  w.u32(0x01020304);
  w.u64(0x1122334455667788ull);
  w.i32(-5);
  w.f32(-1.5f);
  w.f64(3.25);
  w.str("héllo");
  const std::vector<float> f = {1.f, -2.5f, 1e-30f};
  w.f32s(f);
  const std::vector<int32_t> ids = {0, -1, 1 << 30};
  w.i32s(ids);
  // Byte order is fixed by the format, not the host: 0x01020304 is written 04 03 02 01.
  EXPECT_EQ(w.data()[1], 0x04);
  EXPECT_EQ(w.data()[4], 0x01);
  ByteReader r(w.data());
  EXPECT_EQ(r.u8("a"), 7);
  EXPECT_EQ(r.u32("b"), 0x01020304u);
  EXPECT_EQ(r.u64("c"), 0x1122334455667788ull);
  EXPECT_EQ(r.i32("d"), -5);
  EXPECT_EQ(r.f32("e"), -1.5f);
  EXPECT_EQ(r.f64("f"), 3.25);
  EXPECT_EQ(r.str("g", 64), "héllo");
  EXPECT_EQ(r.f32s("h", 16), f);
  EXPECT_EQ(r.i32s("i", 16), ids);
  EXPECT_NO_THROW(r.finish("all"));
}

TEST(Wire, RejectsCountsOverTheLimitOrTheBytesLeft) {
  ByteWriter w;
  w.u32(1000);  // claims 1000 floats but carries none
  ByteReader r(w.data());
  EXPECT_ERROR(r.f32s("floats", 1 << 20), "floats: count 1000 needs more than");
  ByteReader r2(w.data());
  EXPECT_ERROR(r2.f32s("floats", 10), "floats: count 1000 exceeds the limit 10");  // over the stated maximum
  ByteWriter s;
  s.str("abcdef");
  ByteReader r3(s.data());
  EXPECT_ERROR(r3.str("name", 3), "name: count 6 exceeds the limit 3");
  ByteReader r4(s.data());
  r4.u32("len");
  EXPECT_ERROR(r4.finish("msg"), "msg: 6 unexpected trailing bytes");  // trailing bytes
  ByteWriter b;
  b.u8(2);
  ByteReader r5(b.data());
  EXPECT_ERROR(r5.boolean("flag"), "flag: 2 is not a boolean");
}

std::array<uint8_t, kFrameHeaderBytes> header(uint32_t word, uint32_t len) {
  ByteWriter w;
  w.u32(word);
  w.u32(len);
  std::array<uint8_t, kFrameHeaderBytes> h{};
  std::copy(w.data().begin(), w.data().end(), h.begin());
  return h;
}

TEST(Frame, HeaderChecksMagicTypeAndPerTypeLimit) {
  MsgType t;
  EXPECT_EQ(parse_frame_header(header(kFrameMagic << 16 | 12, 100), t), 100u);
  EXPECT_EQ(t, MsgType::Step);
  EXPECT_ERROR(parse_frame_header(header(0x47455420, 4), t), "bad frame magic");                        // "GET "
  EXPECT_ERROR(parse_frame_header(header(kFrameMagic << 16 | 0, 0), t), "unknown message type 0");      // type 0
  EXPECT_ERROR(parse_frame_header(header(kFrameMagic << 16 | 999, 0), t), "unknown message type 999");  // unknown type
  const uint32_t hello = kFrameMagic << 16 | static_cast<uint32_t>(MsgType::Hello);
  EXPECT_NO_THROW(parse_frame_header(header(hello, 256), t));
  EXPECT_ERROR(parse_frame_header(header(hello, 257), t), "exceeds its limit of 256");  // over Hello's limit
  for (int i = 1; i < static_cast<int>(MsgType::Count); ++i)
    EXPECT_GT(max_payload(static_cast<MsgType>(i)), 0u) << msg_type_name(static_cast<MsgType>(i));
}

TEST(Frame, BeforeAuthenticationOnlySmallHandshakeFramesPass) {
  MsgType t;
  const auto word = [](MsgType m) { return kFrameMagic << 16 | static_cast<uint32_t>(m); };
  // A step announcing 200 MiB is within the step limit, but refused from its header before the handshake.
  EXPECT_NO_THROW(parse_frame_header(header(word(MsgType::Step), 200u << 20), t, Phase::Session));
  try {
    parse_frame_header(header(word(MsgType::Step), 200u << 20), t, Phase::Handshake);
    FAIL() << "pre-auth step accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step frame of 209715200 bytes refused before authentication"),
              std::string::npos)
        << e.what();
  }
  for (MsgType m : {MsgType::Hello, MsgType::Challenge, MsgType::Proof, MsgType::Welcome, MsgType::Error})
    EXPECT_NO_THROW(parse_frame_header(header(word(m), 64), t, Phase::Handshake)) << msg_type_name(m);
  EXPECT_ERROR(parse_frame_header(header(word(MsgType::Error), kHandshakeMaxPayload + 1), t, Phase::Handshake),
               "refused before authentication");
  EXPECT_ERROR(parse_frame_header(header(word(MsgType::KvSet), 16), t, Phase::Handshake),
               "refused before authentication");
  EXPECT_ERROR(parse_frame_header(header(word(MsgType::Load), 16), t, Phase::Handshake),
               "refused before authentication");
}

// A worker's error arrives with its origin and blame, naming the worker: a broken collective
// there stays a peer's echo for the coordinator's report.
TEST(Frame, ErrorPayloadKeepsOriginAndBlame) {
  const Error sent("gloo", "rank 2: all_reduce failed", "cpu:0", Blame::Peer);
  const Error got = read_error_payload(error_payload(sent), "tcp://w:7");
  EXPECT_EQ(got.origin(), "gloo");
  EXPECT_EQ(got.message(), sent.message());
  EXPECT_EQ(got.device(), "tcp://w:7");
  EXPECT_EQ(got.blame(), Blame::Peer);
  auto bytes = error_payload(Error("net", "x"));
  bytes.push_back(0);  // trailing garbage
  EXPECT_ERROR(read_error_payload(bytes, "tcp://w:7"), "error: 1 unexpected trailing bytes");
}

TEST(Frame, SendAndReceiveOverLoopbackWithTimeouts) {
  Listener l({"127.0.0.1", 0});
  Socket c = connect_tcp({"127.0.0.1", l.port()}, 2000);
  Socket s = l.accept(2000);
  ASSERT_TRUE(s.valid());
  std::vector<uint8_t> payload(100000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 31 + 7);
  send_frame(c, MsgType::Step, payload, 2000);
  Frame f = recv_frame(s, 2000, 2000);
  EXPECT_EQ(f.type, MsgType::Step);
  EXPECT_EQ(f.payload, payload);
  // Nothing sent: the receive times out instead of hanging.
  EXPECT_ERROR(recv_frame(s, 50, 50), "no reply within 50 ms");
  // A truncated frame (header promises 100 bytes, 10 arrive, then the peer closes).
  auto h = header(kFrameMagic << 16 | static_cast<uint32_t>(MsgType::Step), 100);
  c.send_all(h.data(), h.size(), 1000);
  c.send_all(payload.data(), 10, 1000);
  c.close();
  try {
    recv_frame(s, 1000, 1000);
    FAIL() << "truncated frame accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::net
