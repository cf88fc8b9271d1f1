#include "net/handshake.h"

#include "core/error.h"
#include "net/frame.h"
#include "net/wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <iterator>

namespace weft::net {
namespace {

std::vector<uint8_t> nonce() {
  std::vector<uint8_t> n(kNonceBytes);
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) fail("net", "RAND_bytes failed");
  return n;
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
  ByteWriter w;
  w.str(text.substr(0, 1000));
  try {
    send_frame(s, MsgType::Error, w.data(), 1000);
  } catch (const Error&) {  // the peer may already be gone; the caller reports the real cause
  }
}

}  // namespace

std::vector<uint8_t> read_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("net", "cannot read auth key file '{}'", path);
  std::vector<uint8_t> key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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

void client_handshake(Socket& s, const std::vector<uint8_t>& key, Version version) {
  const auto nc = nonce();
  ByteWriter hello;
  hello.u32(kHelloMagic);
  hello.u32(version.major);
  hello.u32(version.minor);
  hello.bytes(nc);
  send_frame(s, MsgType::Hello, hello.data(), kHandshakeTimeoutMs);

  Frame f = expect_frame(s, MsgType::Challenge, kHandshakeTimeoutMs, kHandshakeTimeoutMs);
  ByteReader r(f.payload);
  const uint32_t major = r.u32("worker version"), minor = r.u32("worker version");
  const bool required = r.boolean("auth flag");
  const auto nw_span = r.bytes("worker nonce", kNonceBytes);
  r.finish("challenge");
  const std::vector<uint8_t> nw(nw_span.begin(), nw_span.end());
  if (major != version.major)
    fail("net", "{}: worker speaks protocol {}.{}, this coordinator {}.{}", s.peer(), major, minor, version.major, version.minor);
  if (required && key.empty()) fail("net", "{}: worker requires an auth key (--auth-key-file or WEFT_AUTH_KEY_FILE)", s.peer());
  if (!required && !key.empty()) fail("net", "{}: worker does not authenticate but a key was given", s.peer());

  ByteWriter p;
  if (!key.empty()) p.bytes(proof(key, "weft-coordinator", nc, nw));
  send_frame(s, MsgType::Proof, p.data(), kHandshakeTimeoutMs);
  Frame welcome = expect_frame(s, MsgType::Welcome, kHandshakeTimeoutMs, kHandshakeTimeoutMs);
  if (!key.empty() && !same(proof(key, "weft-worker", nw, nc), welcome.payload))
    fail("net", "{}: worker failed authentication (different key)", s.peer());
}

void server_handshake(Socket& s, const std::vector<uint8_t>& key) {
  Frame f = expect_frame(s, MsgType::Hello, kHandshakeTimeoutMs, kHandshakeTimeoutMs);
  ByteReader r(f.payload);
  if (r.u32("hello magic") != kHelloMagic) fail("net", "{}: bad hello magic", s.peer());
  const uint32_t major = r.u32("coordinator version"), minor = r.u32("coordinator version");
  const auto nc_span = r.bytes("coordinator nonce", kNonceBytes);
  r.finish("hello");
  const std::vector<uint8_t> nc(nc_span.begin(), nc_span.end());
  if (major != kProtocolMajor) {
    const std::string msg = fmt::format("protocol {}.{} is not supported (worker speaks {}.{})", major, minor,
                                        kProtocolMajor, kProtocolMinor);
    send_error(s, msg);
    fail("net", "{}: {}", s.peer(), msg);
  }
  const auto nw = nonce();
  ByteWriter c;
  c.u32(kProtocolMajor);
  c.u32(kProtocolMinor);
  c.u8(key.empty() ? 0 : 1);
  c.bytes(nw);
  send_frame(s, MsgType::Challenge, c.data(), kHandshakeTimeoutMs);

  Frame p = expect_frame(s, MsgType::Proof, kHandshakeTimeoutMs, kHandshakeTimeoutMs);
  if (!key.empty() && !same(proof(key, "weft-coordinator", nc, nw), p.payload)) {
    send_error(s, "authentication failed (wrong key)");
    fail("net", "{}: coordinator failed authentication", s.peer());
  }
  ByteWriter w;
  if (!key.empty()) w.bytes(proof(key, "weft-worker", nw, nc));
  send_frame(s, MsgType::Welcome, w.data(), kHandshakeTimeoutMs);
}

}  // namespace weft::net
