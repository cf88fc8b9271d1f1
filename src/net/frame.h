// Frames: {u32 magic|type, u32 payload length, payload}, little-endian. The high 16 bits of the
// first word are the magic 'WF' so a stray connection (HTTP, a port scanner) is rejected at its first
// 8 bytes; every type has a hard payload limit checked before anything is allocated. Before the
// handshake has authenticated the peer (Phase::Handshake) only the handshake's own small messages
// are accepted, so an unauthenticated peer cannot make the worker allocate more than 4 KiB.
// After an authenticated handshake each frame also carries a MAC (see channel.h).
#pragma once

#include "core/error.h"
#include "net/socket.h"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace weft::net {

inline constexpr uint32_t kFrameMagic = 0x5746;  // "WF"
inline constexpr size_t kFrameHeaderBytes = 8;

enum class MsgType : uint16_t {
  Hello = 1,    // coordinator -> worker: magic, version, nonce
  Challenge,    // worker -> coordinator: version, whether a key is required, nonce
  Proof,        // coordinator -> worker: HMAC over both nonces
  Welcome,      // worker -> coordinator: its own HMAC (mutual authentication)
  Error,        // either way: a message, then the sender closes the session
  GroupSetup,   // coordinator -> worker: rendezvous address, rank, size
  GroupReady,   // worker -> coordinator
  Load,         // coordinator -> worker: DeviceGraph, LoadOptions, tensor count
  Tensor,       // coordinator -> worker: every streamed weight slice's header
  TensorChunk,  // coordinator -> worker: the slices' bytes, back to back (a chunk may span slices)
  Loaded,       // worker -> coordinator
  Step,         // coordinator -> worker
  StepResult,   // worker -> coordinator
  Bye,          // coordinator -> worker: end of session
  KvSet,        // rendezvous store: key + value
  KvGet,        // rendezvous store: key (the server replies when it exists)
  KvValue,      // rendezvous store: value
  Heartbeat,    // worker -> coordinator: still working on the request (empty; see remote_device.h)
  LoadSource,   // worker -> coordinator: where its weights come from (model dir, cache, or stream them)
  DeviceInfo,   // worker -> coordinator: the device it serves (its session's first frame; protocol 9.2)
  Count
};
std::string_view msg_type_name(MsgType t);
// Largest payload accepted for each type.
size_t max_payload(MsgType t);

// What the receiver accepts: before authentication only hello/challenge/proof/welcome/error of at
// most kHandshakeMaxPayload bytes; afterwards every type up to its own limit.
enum class Phase { Handshake, Session };
inline constexpr size_t kHandshakeMaxPayload = 4096;

struct Frame {
  MsgType type = MsgType::Error;
  std::vector<uint8_t> payload;
};

// Parses and validates a frame header; throws weft::Error("net", ...) on a bad magic, an unknown
// type, a length over the type's limit, or a type or length the phase does not allow. Returns the
// payload length.
uint32_t parse_frame_header(std::span<const uint8_t, kFrameHeaderBytes> h, MsgType& type, Phase phase = Phase::Session);
std::vector<uint8_t> encode_frame(MsgType t, std::span<const uint8_t> payload);
// The header of a frame of type t with a payload of n bytes (checked against the type's limit).
std::array<uint8_t, kFrameHeaderBytes> frame_header(MsgType t, size_t n);

// Plain frames, for the handshake and the rendezvous store; a session's frames go through
// net::Channel (channel.h), which adds the MAC.
void send_frame(Socket& s, MsgType t, std::span<const uint8_t> payload, int timeout_ms);
// One frame whose payload is the concatenation of parts (weights sent from the model mapping).
void send_frame_parts(Socket& s, MsgType t, std::span<const std::span<const uint8_t>> parts, int timeout_ms);
// Receives and validates a frame header; the caller then receives exactly the returned payload
// length itself (e.g. straight into its final place).
uint32_t recv_frame_header(Socket& s, MsgType& type, int timeout_ms, Phase phase = Phase::Session);
// header_timeout_ms bounds the wait for a frame to start (idle); body_timeout_ms the rest of it.
Frame recv_frame(Socket& s, int header_timeout_ms, int body_timeout_ms, Phase phase = Phase::Session);
// recv_frame that also requires the type; an Error frame from the peer is rethrown with its text.
Frame expect_frame(Socket& s, MsgType want, int header_timeout_ms, int body_timeout_ms = 30000,
                   Phase phase = Phase::Session);
// An Error frame carries an error's origin, blame and message; the receiver names the sender
// (peer) as the device it happened on, so a worker's broken collective stays a Blame::Peer error.
std::vector<uint8_t> error_payload(const Error& e);
Error read_error_payload(std::span<const uint8_t> payload, const std::string& peer);
// What expect_frame checks once a frame is in: throws for an Error frame (its text, naming peer)
// or a type other than want.
void check_frame(const Frame& f, MsgType want, const std::string& peer);

}  // namespace weft::net
