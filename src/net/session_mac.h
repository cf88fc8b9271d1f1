// Per-session frame authentication after the HMAC handshake. Both sides derive one key per
// direction from the shared key and the handshake's two fresh nonces:
//   k_dir = HMAC-SHA256(shared key, "weft-session " + dir + nc + nw), dir = "c2w" or "w2c",
// and tag every frame with HMAC-SHA256(k_dir, seq || header || payload) truncated to 16 bytes,
// where seq counts that direction's frames from 0. A tampered, replayed, reordered, dropped or
// cross-session frame fails its tag. Integrity only, no confidentiality: what crosses the link
// (token ids, candidates, weights the worker may already have) is not secret in weft's threat model,
// and HMAC needs nothing beyond the handshake's primitive. A default-constructed SessionMac is off
// (no key: loopback-only unauthenticated mode) and frames carry no tag.
#pragma once

#include "net/frame.h"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::net {

inline constexpr size_t kMacTagBytes = 16;
using MacTag = std::array<uint8_t, kMacTagBytes>;

enum class Role { Coordinator, Worker };

class SessionMac {
 public:
  SessionMac() = default;
  // nc, nw: the coordinator's and the worker's handshake nonces; role: this side.
  SessionMac(const std::vector<uint8_t>& key, const std::vector<uint8_t>& nc, const std::vector<uint8_t>& nw,
             Role role);
  bool enabled() const { return !send_key_.empty(); }
  size_t tag_bytes() const { return enabled() ? kMacTagBytes : 0; }
  // The tag of the next frame this side sends (advances the send counter).
  MacTag sign(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const uint8_t> payload);
  // The same for a payload given as consecutive parts (no joining copy).
  MacTag sign(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const std::span<const uint8_t>> parts);
  // Checks the next received frame's tag (advances the receive counter); throws naming peer.
  void verify(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const uint8_t> payload,
              std::span<const uint8_t> tag, const std::string& peer);
  // The same for a payload received in consecutive parts.
  void verify(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const std::span<const uint8_t>> parts,
              std::span<const uint8_t> tag, const std::string& peer);

 private:
  std::vector<uint8_t> send_key_, recv_key_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
};

// Truncated HMAC-SHA256 over several pieces (no concatenation copy).
MacTag mac_tag(const std::vector<uint8_t>& key, std::span<const std::span<const uint8_t>> pieces);
MacTag mac_tag(const std::vector<uint8_t>& key, std::initializer_list<std::span<const uint8_t>> pieces);

}  // namespace weft::net
