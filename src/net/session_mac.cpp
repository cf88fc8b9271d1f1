#include "net/session_mac.h"

#include "core/error.h"
#include "net/handshake.h"
#include "net/wire.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace weft::net {
namespace {

std::vector<uint8_t> direction_key(const std::vector<uint8_t>& key, std::string_view dir,
                                   const std::vector<uint8_t>& nc, const std::vector<uint8_t>& nw) {
  std::vector<uint8_t> msg;
  for (std::string_view part : {std::string_view("weft-session "), dir})
    msg.insert(msg.end(), part.begin(), part.end());
  msg.insert(msg.end(), nc.begin(), nc.end());
  msg.insert(msg.end(), nw.begin(), nw.end());
  return hmac_sha256(key, msg);
}

std::array<uint8_t, 8> seq_bytes(uint64_t seq) {
  std::array<uint8_t, 8> b;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(seq >> (8 * i));
  return b;
}

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};

}  // namespace

MacTag mac_tag(const std::vector<uint8_t>& key, std::initializer_list<std::span<const uint8_t>> pieces) {
  return mac_tag(key, std::span<const std::span<const uint8_t>>(pieces.begin(), pieces.size()));
}

MacTag mac_tag(const std::vector<uint8_t>& key, std::span<const std::span<const uint8_t>> pieces) {
  // Fetched once: the algorithm lookup costs more than a small frame's MAC.
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!hmac) fail("net", "HMAC is not available in this OpenSSL");
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx(EVP_MAC_CTX_new(hmac));
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (!ctx || EVP_MAC_init(ctx.get(), key.data(), key.size(), params) != 1) fail("net", "HMAC-SHA256 init failed");
  for (auto p : pieces)
    if (EVP_MAC_update(ctx.get(), p.data(), p.size()) != 1) fail("net", "HMAC-SHA256 update failed");
  std::array<uint8_t, EVP_MAX_MD_SIZE> full;
  size_t n = 0;
  if (EVP_MAC_final(ctx.get(), full.data(), &n, full.size()) != 1 || n < kMacTagBytes)
    fail("net", "HMAC-SHA256 failed");
  MacTag t;
  std::copy(full.begin(), full.begin() + kMacTagBytes, t.begin());
  return t;
}

SessionMac::SessionMac(const std::vector<uint8_t>& key, const std::vector<uint8_t>& nc, const std::vector<uint8_t>& nw,
                       Role role) {
  WEFT_ASSERT(!key.empty());
  auto c2w = direction_key(key, "c2w", nc, nw), w2c = direction_key(key, "w2c", nc, nw);
  send_key_ = role == Role::Coordinator ? c2w : w2c;
  recv_key_ = role == Role::Coordinator ? w2c : c2w;
}

MacTag SessionMac::sign(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const uint8_t> payload) {
  const auto seq = seq_bytes(send_seq_++);
  return mac_tag(send_key_, {seq, header, payload});
}

MacTag SessionMac::sign(std::span<const uint8_t, kFrameHeaderBytes> header,
                        std::span<const std::span<const uint8_t>> parts) {
  const auto seq = seq_bytes(send_seq_++);
  std::vector<std::span<const uint8_t>> pieces{seq, header};
  pieces.insert(pieces.end(), parts.begin(), parts.end());
  return mac_tag(send_key_, pieces);
}

void SessionMac::verify(std::span<const uint8_t, kFrameHeaderBytes> header, std::span<const uint8_t> payload,
                        std::span<const uint8_t> tag, const std::string& peer) {
  verify(header, std::span<const std::span<const uint8_t>>(&payload, 1), tag, peer);
}

void SessionMac::verify(std::span<const uint8_t, kFrameHeaderBytes> header,
                        std::span<const std::span<const uint8_t>> parts, std::span<const uint8_t> tag,
                        const std::string& peer) {
  const uint64_t seq = recv_seq_++;
  const auto s = seq_bytes(seq);
  std::vector<std::span<const uint8_t>> pieces{s, header};
  pieces.insert(pieces.end(), parts.begin(), parts.end());
  const MacTag want = mac_tag(recv_key_, pieces);
  if (tag.size() != want.size() || CRYPTO_memcmp(want.data(), tag.data(), want.size()) != 0) {
    MsgType t;
    parse_frame_header(header, t);
    fail_on("net", peer,
            "{} frame #{} failed authentication (tampered, replayed, reordered or not from the "
            "authenticated peer); connection closed",
            msg_type_name(t), seq);
  }
}

}  // namespace weft::net
