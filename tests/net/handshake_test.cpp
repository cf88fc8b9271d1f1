// Handshake: matching keys pass both ways; a wrong key, a missing key and a different protocol
// major fail on both sides with errors that say why. HMAC checked against RFC 4231 test case 2.
#include "net/handshake.h"
#include "core/error.h"
#include "net/frame.h"
#include "net/wire.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <future>

namespace weft::net {
namespace {

std::vector<uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

TEST(Handshake, HmacSha256MatchesRfc4231) {
  const auto mac = hmac_sha256(bytes("Jefe"), bytes("what do ya want for nothing?"));
  const uint8_t want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                          0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                          0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(mac, std::vector<uint8_t>(std::begin(want), std::end(want)));
}

// Runs the two sides on loopback; returns the server's error text ("" when it succeeded).
std::string run(const std::vector<uint8_t>& client_key, const std::vector<uint8_t>& server_key, Version v,
                std::string* client_error) {
  Listener l({"127.0.0.1", 0});
  auto server = std::async(std::launch::async, [&] {
    Socket s = l.accept(3000);
    try {
      server_handshake(s, server_key);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  Socket c = connect_tcp({"127.0.0.1", l.port()}, 3000);
  try {
    client_handshake(c, client_key, v);
    *client_error = "";
  } catch (const Error& e) {
    *client_error = e.what();
  }
  c.close();
  return server.get();
}

TEST(Handshake, SameKeyOrNoKeyPasses) {
  std::string ce;
  EXPECT_EQ(run(bytes("0123456789abcdef-key"), bytes("0123456789abcdef-key"), {}, &ce), "");
  EXPECT_EQ(ce, "");
  EXPECT_EQ(run({}, {}, {}, &ce), "");
  EXPECT_EQ(ce, "");
}

TEST(Handshake, WrongOrMissingKeyFails) {
  std::string ce;
  EXPECT_NE(run(bytes("0123456789abcdef-one"), bytes("0123456789abcdef-two"), {}, &ce), "");
  EXPECT_NE(ce.find("authentication"), std::string::npos) << ce;
  run({}, bytes("0123456789abcdef-two"), {}, &ce);
  EXPECT_NE(ce.find("requires an auth key"), std::string::npos) << ce;
}

TEST(Handshake, DifferentProtocolMajorFails) {
  std::string ce;
  const std::string se = run({}, {}, Version{static_cast<uint16_t>(kProtocolMajor + 1), 0}, &ce);
  EXPECT_NE(se.find("not supported"), std::string::npos) << se;
  EXPECT_NE(ce.find("not supported"), std::string::npos) << ce;
}

// A llama.cpp rpc-server reads one command byte, finds it is not its RPC_CMD_HELLO and closes the
// connection (reset: the rest of weft's hello is unread); an HTTP server answers with text.
TEST(Handshake, APeerThatIsNoWeftWorkerIsNamedSo) {
  for (const bool http : {false, true}) {
    Listener l({"127.0.0.1", 0});
    auto server = std::async(std::launch::async, [&] {
      Socket s = l.accept(3000);
      uint8_t cmd = 0;
      s.recv_exact(&cmd, 1, 3000);
      if (http) {
        const std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
        s.send_all(reply.data(), reply.size(), 3000);
      }
      s.close();
    });
    Socket c = connect_tcp({"127.0.0.1", l.port()}, 3000);
    EXPECT_ERROR(client_handshake(c, {}), http ? "not a weft worker: it answered with bytes that are no weft frame"
                                               : "not a weft worker: it closed the connection instead of answering");
    server.get();
  }
}

// A worker at its handshake capacity refuses `busy` connections (refuse_busy, at once, without
// reading the hello), then handshakes: connect_worker tries again and gets in, within its timeout.
TEST(Handshake, BusyWorkerIsTriedAgainUntilItHasRoom) {
  Listener l({"127.0.0.1", 0});
  constexpr int kRefusals = 3;
  auto server = std::async(std::launch::async, [&] {
    for (int i = 0; i < kRefusals; ++i) {
      Socket s = l.accept(3000);
      refuse_busy(s, "worker busy: testing");
    }
    Socket s = l.accept(3000);
    server_handshake(s, {});
  });
  Connected c = connect_worker({"127.0.0.1", l.port()}, {}, 3000);
  EXPECT_TRUE(c.socket.valid());
  server.get();
}

// Busy past the timeout: the refusal itself is reported (a weft worker, busy: never "not a weft
// worker"), and it is recognised as busy.
TEST(Handshake, BusyPastTheTimeoutIsReportedAsBusy) {
  Listener l({"127.0.0.1", 0});
  std::atomic<bool> done{false};
  auto server = std::async(std::launch::async, [&] {
    while (!done) {
      Socket s = l.accept(100);
      if (s.valid()) refuse_busy(s, "worker busy: 64 connections in their handshake");
    }
  });
  try {
    connect_worker({"127.0.0.1", l.port()}, {}, 300);
    ADD_FAILURE() << "connected to a worker that is always busy";
  } catch (const Error& e) {
    EXPECT_TRUE(is_busy(e)) << e.what();
    EXPECT_NE(std::string(e.what()).find("worker busy: 64 connections"), std::string::npos) << e.what();
  }
  done = true;
  server.get();
}

void write_file(const std::string& path, const char* text, mode_t mode) {
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text, f);
  std::fclose(f);
  ::chmod(path.c_str(), mode);
}

TEST(Handshake, ShortKeyFileIsRejected) {
  const std::string path = testing::TempDir() + "/weft_short_key";
  write_file(path, "short\n", 0600);
  EXPECT_ERROR(read_key_file(path), "bytes; at least");
}

TEST(Handshake, KeyFileReadableByOthersIsRefused) {
  const std::string path = testing::TempDir() + "/weft_open_key";
  write_file(path, "0123456789abcdef-key\n", 0644);
  try {
    read_key_file(path);
    FAIL() << "0644 key file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is readable by others (mode 0644); chmod 600 it"), std::string::npos)
        << e.what();
  }
  ::chmod(path.c_str(), 0640);
  EXPECT_ERROR(read_key_file(path), "is readable by others (mode 0640)");
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(read_key_file(path), bytes("0123456789abcdef-key"));
}

TEST(Handshake, KeyFileThatIsADirectoryOrTooLongIsRefused) {
  const std::string dir = testing::TempDir() + "/weft_key_dir";
  std::filesystem::create_directories(dir);
  ::chmod(dir.c_str(), 0700);
  EXPECT_ERROR(read_key_file(dir), "is a directory");
  const std::string big = testing::TempDir() + "/weft_big_key";
  write_file(big, std::string(1 << 20, 'k').c_str(), 0600);  // read whole before: no bound
  EXPECT_ERROR(read_key_file(big), "more than the limit");
}

// A recorded proof replayed into a new session (its challenge nonce differs) is refused, and the
// message says a replay is one of the two causes.
TEST(Handshake, ReplayedProofIsRefusedSayingSo) {
  const auto key = bytes("0123456789abcdef-key");
  Listener l({"127.0.0.1", 0});
  auto server = std::async(std::launch::async, [&] {
    std::string errors;
    for (int i = 0; i < 2; ++i) {
      Socket s = l.accept(3000);
      try {
        server_handshake(s, key);
      } catch (const Error& e) {
        errors += e.what();
      }
    }
    return errors;
  });
  const std::vector<uint8_t> nc(kNonceBytes, 5);
  std::vector<uint8_t> recorded;
  for (int i = 0; i < 2; ++i) {
    Socket c = connect_tcp({"127.0.0.1", l.port()}, 3000);
    ByteWriter hello;
    hello.u32(kHelloMagic);
    hello.u32(kProtocolMajor);
    hello.u32(kProtocolMinor);
    hello.bytes(nc);
    send_frame(c, MsgType::Hello, hello.data(), 1000);
    Frame ch = expect_frame(c, MsgType::Challenge, 3000);
    const std::vector<uint8_t> nw(ch.payload.end() - kNonceBytes, ch.payload.end());
    if (i == 0) {  // the legitimate session, as recorded by an eavesdropper
      std::vector<uint8_t> msg = bytes("weft-coordinator");
      msg.insert(msg.end(), nc.begin(), nc.end());
      msg.insert(msg.end(), nw.begin(), nw.end());
      recorded = hmac_sha256(key, msg);
      send_frame(c, MsgType::Proof, recorded, 1000);
      EXPECT_NO_THROW(expect_frame(c, MsgType::Welcome, 3000));
    } else {
      send_frame(c, MsgType::Proof, recorded, 1000);
      try {
        expect_frame(c, MsgType::Welcome, 3000);
        FAIL() << "replayed proof accepted";
      } catch (const Error& e) {
        EXPECT_NE(
            std::string(e.what()).find("does not match this session's challenge (wrong key or a replayed handshake)"),
            std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_NE(server.get().find("replayed handshake"), std::string::npos);
}

}  // namespace
}  // namespace weft::net
