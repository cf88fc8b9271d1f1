#include "net/channel.h"

#include "core/error.h"
#include "net/wire.h"

namespace weft::net {

// One sendmsg for header, payload and tag: a step's frame leaves as one segment, and a weight
// chunk is sent from where it lies rather than copied next to its header.
void Channel::send(MsgType t, std::span<const uint8_t> payload, int timeout_ms) {
  send_parts(t, std::span(&payload, 1), timeout_ms);
}

void Channel::send_parts(MsgType t, std::span<const std::span<const uint8_t>> parts, int timeout_ms) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size();
  const auto header = frame_header(t, n);
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
