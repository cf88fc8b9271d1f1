// Session opening between a coordinator and a worker: magic + protocol version, then mutual
// HMAC-SHA256 challenge-response over fresh nonces with a shared key (never sent). Majors must match;
// a newer minor on either side is accepted (minors only add optional fields).
#pragma once

#include "net/socket.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::net {

inline constexpr uint32_t kHelloMagic = 0x54464557;  // "WEFT" little-endian
// 2: heartbeats while a request runs; Load names the model (size + SHA-256) and its slices.
inline constexpr uint16_t kProtocolMajor = 4;  // 4: all slice headers first, chunks span slices
inline constexpr uint16_t kProtocolMinor = 0;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMinKeyBytes = 16;
inline constexpr int kHandshakeTimeoutMs = 10000;

struct Version {
  uint16_t major = kProtocolMajor, minor = kProtocolMinor;
};

// The key file's bytes, trailing whitespace removed; at least kMinKeyBytes.
std::vector<uint8_t> read_key_file(const std::string& path);
std::vector<uint8_t> hmac_sha256(const std::vector<uint8_t>& key, const std::vector<uint8_t>& msg);

// Coordinator side; key empty = no authentication (the worker must then not require one).
// `version` is overridable for tests. Throws weft::Error("net", ...) naming the peer.
void client_handshake(Socket& s, const std::vector<uint8_t>& key, Version version = {});
// Worker side; key empty = accept any coordinator.
void server_handshake(Socket& s, const std::vector<uint8_t>& key);

}  // namespace weft::net
