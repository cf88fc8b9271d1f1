#include "net/channel.h"

#include "core/error.h"
#include "net/wire.h"

#include <array>

namespace weft::net {
namespace {
// Up to this size header, payload and tag go out in one send (one TCP segment for a step); larger
// payloads (weight chunks) are sent in place rather than copied next to their header.
constexpr size_t kCoalesceBytes = 64 * 1024;
}  // namespace

void Channel::send(MsgType t, std::span<const uint8_t> payload, int timeout_ms) {
  WEFT_ASSERT(payload.size() <= max_payload(t));
  ByteWriter w;
  w.u32(kFrameMagic << 16 | static_cast<uint32_t>(t));
  w.u32(static_cast<uint32_t>(payload.size()));
  const std::span<const uint8_t, kFrameHeaderBytes> header(w.data().data(), kFrameHeaderBytes);
  MacTag tag{};
  if (mac_.enabled()) tag = mac_.sign(header, payload);
  const std::span<const uint8_t> tail(tag.data(), mac_.tag_bytes());
  if (payload.size() <= kCoalesceBytes) {
    w.bytes(payload);
    w.bytes(tail);
    s_.send_all(w.data().data(), w.data().size(), timeout_ms);
    return;
  }
  s_.send_all(w.data().data(), kFrameHeaderBytes, timeout_ms);
  s_.send_all(payload.data(), payload.size(), timeout_ms);
  if (!tail.empty()) s_.send_all(tail.data(), tail.size(), timeout_ms);
}

void Channel::send_parts(MsgType t, std::span<const std::span<const uint8_t>> parts, int timeout_ms) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size();
  WEFT_ASSERT(n <= max_payload(t));
  ByteWriter w;
  w.u32(kFrameMagic << 16 | static_cast<uint32_t>(t));
  w.u32(static_cast<uint32_t>(n));
  const std::span<const uint8_t, kFrameHeaderBytes> header(w.data().data(), kFrameHeaderBytes);
  MacTag tag{};
  if (mac_.enabled()) tag = mac_.sign(header, parts);
  std::vector<std::span<const uint8_t>> all{header};
  all.insert(all.end(), parts.begin(), parts.end());
  if (mac_.enabled()) all.emplace_back(tag.data(), tag.size());
  s_.send_all(all, timeout_ms);
}

uint32_t Channel::recv_header(MsgType& type, int timeout_ms) {
  WEFT_ASSERT(!in_frame_);
  s_.recv_exact(header_.data(), header_.size(), timeout_ms);
  pending_ = parse_frame_header(header_, type);
  in_frame_ = true;
  return pending_;
}

void Channel::recv_payload_into(std::span<const std::span<uint8_t>> parts, int timeout_ms) {
  size_t len = 0;
  for (const auto& p : parts) len += p.size();
  WEFT_ASSERT(in_frame_ && len == pending_);
  in_frame_ = false;
  std::vector<std::span<const uint8_t>> got;
  for (const auto& p : parts) {
    s_.recv_exact(p.data(), p.size(), timeout_ms);
    got.emplace_back(p.data(), p.size());
  }
  if (!mac_.enabled()) return;
  MacTag tag;
  s_.recv_exact(tag.data(), tag.size(), timeout_ms);
  mac_.verify(header_, got, tag, s_.peer());
}

Frame Channel::recv(int header_timeout_ms, int body_timeout_ms) {
  std::array<uint8_t, kFrameHeaderBytes> h;
  s_.recv_exact(h.data(), h.size(), header_timeout_ms);
  Frame f;
  const uint32_t len = parse_frame_header(h, f.type);
  const size_t tag_bytes = mac_.tag_bytes();
  f.payload.resize(len + tag_bytes);  // the tag is read with the payload, then cut off (no reallocation)
  s_.recv_exact(f.payload.data(), f.payload.size(), body_timeout_ms);
  if (tag_bytes) {
    mac_.verify(h, std::span<const uint8_t>(f.payload.data(), len),
                std::span<const uint8_t>(f.payload.data() + len, tag_bytes), s_.peer());
    f.payload.resize(len);
  }
  return f;
}

Frame Channel::expect(MsgType want, int header_timeout_ms, int body_timeout_ms) {
  Frame f = recv(header_timeout_ms, body_timeout_ms);
  check_frame(f, want, s_.peer());
  return f;
}

}  // namespace weft::net
