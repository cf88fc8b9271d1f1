#include "net/handshake.h"

#include "core/error.h"
#include "core/text_file.h"
#include "net/frame.h"
#include "net/wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <thread>

namespace weft::net {
namespace {

std::vector<uint8_t> nonce() { return random_bytes(kNonceBytes); }

using Clock = std::chrono::steady_clock;
int ms_left(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d < 1 ? 1 : static_cast<int>(d);
}

// HMAC over a role label and both nonces: the label keeps a worker's answer from being replayed
// as a coordinator's proof.
std::vector<uint8_t> proof(const std::vector<uint8_t>& key, std::string_view role, const std::vector<uint8_t>& a,
                           const std::vector<uint8_t>& b) {
  std::vector<uint8_t> msg(role.begin(), role.end());
  msg.insert(msg.end(), a.begin(), a.end());
  msg.insert(msg.end(), b.begin(), b.end());
  return hmac_sha256(key, msg);
}

bool same(const std::vector<uint8_t>& a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void send_error(Socket& s, const std::string& text) {
  try {
    send_frame(s, MsgType::Error, error_payload(Error("net", text)), 1000);
  } catch (const Error&) {  // the peer may already be gone; the caller reports the real cause
  }
}

// The worker side; throws after sending the coordinator one Error frame for what it detects.
SessionMac serve_handshake(Socket& s, const std::vector<uint8_t>& key, Clock::time_point deadline,
                           const std::function<std::string()>& admit, Version version, Version* coordinator,
                           bool& error_sent) {
  auto reject = [&](const std::string& msg) {
    send_error(s, msg);
    error_sent = true;
    fail("net", "{}: {}", s.peer(), msg);
  };
  Frame f = expect_frame(s, MsgType::Hello, ms_left(deadline), ms_left(deadline), Phase::Handshake);
  ByteReader r(f.payload);
  if (r.u32("hello magic") != kHelloMagic) reject("bad hello magic");
  const uint32_t major = r.u32("coordinator version"), minor = r.u32("coordinator version");
  const auto nc_span = r.bytes("coordinator nonce", kNonceBytes);
  r.finish("hello");
  const std::vector<uint8_t> nc(nc_span.begin(), nc_span.end());
  if (major != version.major)
    reject(fmt::format("protocol {}.{} is not supported (worker speaks {}.{})", major, minor, version.major,
                       version.minor));
  // A minor past 16 bits is no version this build could be told apart from: it counts as the newest.
  if (coordinator) *coordinator = {version.major, static_cast<uint16_t>(std::min<uint32_t>(minor, 0xffff))};
  const auto nw = nonce();
  ByteWriter c;
  c.u32(version.major);
  c.u32(version.minor);
  c.u8(key.empty() ? 0 : 1);
  c.bytes(nw);
  send_frame(s, MsgType::Challenge, c.data(), ms_left(deadline));

  Frame p = expect_frame(s, MsgType::Proof, ms_left(deadline), ms_left(deadline), Phase::Handshake);
  // The nonces are fresh, so a proof recorded from an earlier session fails exactly as a wrong key.
  if (!key.empty() && !same(proof(key, "weft-coordinator", nc, nw), p.payload))
    reject(
        "authentication failed: the proof does not match this session's challenge (wrong key or a replayed "
        "handshake)");
  if (admit)
    if (std::string why = admit(); !why.empty()) reject(why);
  ByteWriter w;
  if (!key.empty()) w.bytes(proof(key, "weft-worker", nw, nc));
  send_frame(s, MsgType::Welcome, w.data(), ms_left(deadline));
  return key.empty() ? SessionMac() : SessionMac(key, nc, nw, Role::Worker);
}

// A weft worker answers the hello with a challenge or an error frame. Another service answers
// otherwise: a llama.cpp rpc-server (which expects its own RPC_CMD_HELLO first) closes or resets
// the connection at weft's first byte, an HTTP server replies with text. Say so, rather than
// report a reset connection.
Frame expect_challenge(Socket& s) {
  try {
    return expect_frame(s, MsgType::Challenge, kHandshakeTimeoutMs, kHandshakeTimeoutMs, Phase::Handshake);
  } catch (const Error& e) {
    const std::string& m = e.message();
    const bool closed = m.rfind("connection closed by peer", 0) == 0 || m.rfind("connection lost", 0) == 0;
    const bool garbled = m.rfind("bad frame magic", 0) == 0 || m.rfind("unknown message type", 0) == 0;
    if (!closed && !garbled) throw;
    fail_on("net", s.peer(),
            "not a weft worker: it {} weft's hello ({}); a llama.cpp rpc-server does that, as weft does not "
            "speak its protocol: start `weft worker` on that host and port instead",
            closed ? "closed the connection instead of answering" : "answered with bytes that are no weft frame to", m);
  }
}

}  // namespace

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) fail("net", "RAND_bytes failed");
  return b;
}

namespace {
constexpr size_t kMaxKeyFileBytes = 64 << 10;
}  // namespace

std::vector<uint8_t> read_key_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("net", "cannot read auth key file '{}': {}", path, std::strerror(errno));
  if (st.st_mode & 077)
    fail("net", "auth key file '{}' is readable by others (mode {:04o}); chmod 600 it", path, st.st_mode & 07777);
  // A key is a line, not a stream: /dev/zero or a directory named by mistake is an error, not a hang.
  const std::string text = read_text_file(path, "auth key file", kMaxKeyFileBytes);
  std::vector<uint8_t> key(text.begin(), text.end());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  if (key.size() < kMinKeyBytes)
    fail("net", "auth key file '{}' holds {} bytes; at least {} are required", path, key.size(), kMinKeyBytes);
  return key;
}

std::vector<uint8_t> hmac_sha256(const std::vector<uint8_t>& key, const std::vector<uint8_t>& msg) {
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &len))
    fail("net", "HMAC-SHA256 failed");
  out.resize(len);
  return out;
}

SessionMac client_handshake(Socket& s, const std::vector<uint8_t>& key, Version version, int timeout_ms,
                            Version* worker) {
  const auto nc = nonce();
  ByteWriter hello;
  hello.u32(kHelloMagic);
  hello.u32(version.major);
  hello.u32(version.minor);
  hello.bytes(nc);
  send_frame(s, MsgType::Hello, hello.data(), timeout_ms);

  Frame f = expect_challenge(s);
  ByteReader r(f.payload);
  const uint32_t major = r.u32("worker version"), minor = r.u32("worker version");
  const bool required = r.boolean("auth flag");
  const auto nw_span = r.bytes("worker nonce", kNonceBytes);
  r.finish("challenge");
  const std::vector<uint8_t> nw(nw_span.begin(), nw_span.end());
  if (major != version.major)
    fail("net", "{}: worker speaks protocol {}.{}, this coordinator {}.{}", s.peer(), major, minor, version.major,
         version.minor);
  if (required && key.empty())
    fail("net", "{}: worker requires an auth key (--auth-key-file or WEFT_AUTH_KEY_FILE)", s.peer());
  if (!required && !key.empty()) fail("net", "{}: worker does not authenticate but a key was given", s.peer());
  if (worker) *worker = {version.major, static_cast<uint16_t>(std::min<uint32_t>(minor, 0xffff))};

  ByteWriter p;
  if (!key.empty()) p.bytes(proof(key, "weft-coordinator", nc, nw));
  send_frame(s, MsgType::Proof, p.data(), timeout_ms);
  Frame welcome = expect_frame(s, MsgType::Welcome, timeout_ms, timeout_ms, Phase::Handshake);
  if (!key.empty() && !same(proof(key, "weft-worker", nw, nc), welcome.payload))
    fail("net", "{}: worker failed authentication (different key)", s.peer());
  return key.empty() ? SessionMac() : SessionMac(key, nc, nw, Role::Coordinator);
}

void refuse_busy(Socket& s, const std::string& why) {
  try {
    send_frame(s, MsgType::Error, error_payload(Error(kBusyOrigin, why)), 100);
  } catch (const Error&) {  // the peer is gone (or an idle flood's peer never reads): nothing to tell
  }
  // Closed gently: a close with the hello still unread would reset the connection, and the peer
  // could lose the refusal with it. FIN after the frame, what has arrived read and dropped.
  ::shutdown(s.fd(), SHUT_WR);
  std::array<uint8_t, kHandshakeMaxPayload> drop;
  while (::recv(s.fd(), drop.data(), drop.size(), MSG_DONTWAIT) > 0) {
  }
  s.close();
}

bool is_busy(const Error& e) { return e.origin() == kBusyOrigin; }

Connected connect_worker(const HostPort& address, const std::vector<uint8_t>& key, int timeout_ms,
                         int handshake_timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int backoff_ms = kBusyRetryMs;; backoff_ms = std::min(2 * backoff_ms, kBusyRetryMaxMs)) {
    try {
      Connected c{connect_tcp(address, ms_left(deadline)), {}};
      c.mac = client_handshake(c.socket, key, {}, handshake_timeout_ms, &c.worker);
      return c;
    } catch (const Error& e) {
      if (!is_busy(e) || Clock::now() + std::chrono::milliseconds(backoff_ms) >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
  }
}

SessionMac server_handshake(Socket& s, const std::vector<uint8_t>& key, int timeout_ms,
                            const std::function<std::string()>& admit, Version version, Version* coordinator) {
  bool error_sent = false;
  try {
    return serve_handshake(s, key, Clock::now() + std::chrono::milliseconds(timeout_ms), admit, version, coordinator,
                           error_sent);
  } catch (const Error& e) {
    // A refused header, a timeout or a malformed message: say so once (the peer may be gone).
    if (!error_sent) send_error(s, fmt::format("handshake failed: {}", e.message()));
    throw;
  }
}

}  // namespace weft::net
