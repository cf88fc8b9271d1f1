#include "net/frame.h"

#include "core/error.h"
#include "net/wire.h"

#include <array>

namespace weft::net {

std::string_view msg_type_name(MsgType t) {
  static constexpr std::array<std::string_view, static_cast<size_t>(MsgType::Count)> names = {
      "?",           "hello",  "challenge", "proof",        "welcome",   "error",       "group-setup",
      "group-ready", "load",   "tensor",    "tensor-chunk", "loaded",    "step",        "step-result",
      "bye",         "kv-set", "kv-get",    "kv-value",     "heartbeat", "load-source", "device-info"};
  const auto i = static_cast<size_t>(t);
  return i < names.size() ? names[i] : "?";
}

size_t max_payload(MsgType t) {
  constexpr size_t KiB = 1024, MiB = 1024 * KiB;
  switch (t) {
    case MsgType::Hello:
    case MsgType::Challenge:
    case MsgType::Proof:
    case MsgType::Welcome: return 256;
    case MsgType::Error: return 4 * KiB;
    case MsgType::GroupSetup:
    case MsgType::GroupReady:
    case MsgType::Loaded: return 4 * KiB;
    case MsgType::Load: return 64 * MiB;    // a DeviceGraph: a few hundred bytes per node
    case MsgType::Tensor: return 64 * MiB;  // every slice's header: under 600 bytes each
    case MsgType::TensorChunk:
      return 16 * MiB;  // weights stream in chunks of at most this
    // Steps carry tokens and, in a layer split, the residual stream [n_tokens, n_embd] f32.
    case MsgType::Step:
    case MsgType::StepResult: return 256 * MiB;
    case MsgType::Bye: return 64;
    case MsgType::KvSet:
    case MsgType::KvValue: return 1 * MiB;
    case MsgType::KvGet: return 4 * KiB;
    case MsgType::Heartbeat: return 8;  // sent empty; room for a future field
    case MsgType::LoadSource: return 64;
    case MsgType::DeviceInfo: return 64 * KiB;  // a name, memory, and per op the weight types: ~2 KiB
    case MsgType::Count: break;
  }
  return 0;
}

namespace {
bool handshake_type(MsgType t) {
  return t == MsgType::Hello || t == MsgType::Challenge || t == MsgType::Proof || t == MsgType::Welcome ||
         t == MsgType::Error;
}
}  // namespace

uint32_t parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> h, MsgType& type, Phase phase) {
  ByteReader r(h);
  const uint32_t word = r.u32("frame header"), len = r.u32("frame length");
  if ((word >> 16) != kFrameMagic) fail("net", "bad frame magic {:#010x} (not a weft peer?)", word);
  const uint32_t t = word & 0xffff;
  if (t == 0 || t >= static_cast<uint32_t>(MsgType::Count)) fail("net", "unknown message type {}", t);
  type = static_cast<MsgType>(t);
  if (phase == Phase::Handshake && (!handshake_type(type) || len > kHandshakeMaxPayload))
    fail("net",
         "{} frame of {} bytes refused before authentication (only hello, challenge, proof, welcome and "
         "error of at most {} bytes)",
         msg_type_name(type), len, kHandshakeMaxPayload);
  if (len > max_payload(type))
    fail("net", "{} frame of {} bytes exceeds its limit of {}", msg_type_name(type), len, max_payload(type));
  return len;
}

std::vector<uint8_t> encode_frame(MsgType t, std::span<const uint8_t> payload) {
  WEFT_ASSERT(payload.size() <= max_payload(t));
  ByteWriter w;
  w.u32(kFrameMagic << 16 | static_cast<uint32_t>(t));
  w.u32(static_cast<uint32_t>(payload.size()));
  w.bytes(payload);
  return std::move(w.data());
}

void send_frame(Socket& s, MsgType t, std::span<const uint8_t> payload, int timeout_ms) {
  send_frame_parts(s, t, std::span(&payload, 1), timeout_ms);
}

std::array<uint8_t, kFrameHeaderBytes> frame_header(MsgType t, size_t n) {
  WEFT_ASSERT(n <= max_payload(t));
  ByteWriter w;
  w.u32(kFrameMagic << 16 | static_cast<uint32_t>(t));
  w.u32(static_cast<uint32_t>(n));
  std::array<uint8_t, kFrameHeaderBytes> h{};
  std::copy(w.data().begin(), w.data().end(), h.begin());
  return h;
}

void send_frame_parts(Socket& s, MsgType t, std::span<const std::span<const uint8_t>> parts, int timeout_ms) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size();
  const auto h = frame_header(t, n);
  std::vector<std::span<const uint8_t>> all{h};
  all.insert(all.end(), parts.begin(), parts.end());
  s.send_all(all, timeout_ms);
}

uint32_t recv_frame_header(Socket& s, MsgType& type, int timeout_ms, Phase phase) {
  std::array<uint8_t, kFrameHeaderBytes> h;
  s.recv_exact(h.data(), h.size(), timeout_ms);
  return parse_frame_header(h, type, phase);
}

Frame recv_frame(Socket& s, int header_timeout_ms, int body_timeout_ms, Phase phase) {
  Frame f;
  const uint32_t len = recv_frame_header(s, f.type, header_timeout_ms, phase);
  f.payload.resize(len);
  s.recv_exact(f.payload.data(), len, body_timeout_ms);
  return f;
}

std::vector<uint8_t> error_payload(const Error& e) {
  ByteWriter w;
  w.str(e.origin().substr(0, 32));
  w.u8(e.blame() == Blame::Peer);
  // A device named by the sender (its own CPU device) adds nothing the receiver does not know.
  w.str(e.message().substr(0, max_payload(MsgType::Error) - 64));
  return std::move(w.data());
}

Error read_error_payload(std::span<const uint8_t> payload, const std::string& peer) {
  ByteReader r(payload);
  std::string origin = r.str("error origin", 32);
  const bool by_peer = r.boolean("error blame");
  std::string message = r.str("error text", max_payload(MsgType::Error));
  r.finish("error");
  return Error(origin.empty() ? "net" : std::move(origin), std::move(message), peer,
               by_peer ? Blame::Peer : Blame::Own);
}

void check_frame(const Frame& f, MsgType want, const std::string& peer) {
  if (f.type == MsgType::Error) throw read_error_payload(f.payload, peer);
  if (f.type != want) fail_on("net", peer, "expected a {} message, got {}", msg_type_name(want), msg_type_name(f.type));
}

Frame expect_frame(Socket& s, MsgType want, int header_timeout_ms, int body_timeout_ms, Phase phase) {
  Frame f = recv_frame(s, header_timeout_ms, body_timeout_ms, phase);
  check_frame(f, want, s.peer());
  return f;
}

}  // namespace weft::net
