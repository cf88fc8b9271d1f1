// Session opening between a coordinator and a worker: magic + protocol version, then mutual
// HMAC-SHA256 challenge-response over fresh nonces with a shared key (never sent). Majors must match;
// a newer minor on either side is accepted (minors only add optional fields). With a key, the
// handshake yields the session's frame MAC (session_mac.h); every frame before it is limited to
// the handshake's own small types (frame.h, Phase::Handshake).
#pragma once

#include "core/error.h"
#include "net/session_mac.h"
#include "net/socket.h"

#include <functional>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::net {

inline constexpr uint32_t kHelloMagic = 0x54464557;  // "WEFT" little-endian
// 2: heartbeats while a request runs; Load names the model (size + SHA-256) and its slices.
// 3: Load carries the KV cache types.
// 4: session frames carry a MAC when a key is in use; all slice headers first, chunks span slices.
// 5: a step carries several sequences in KV slots (continuous batching).
// 6: a step's sequences may ask for scored rows (perplexity), its results carry their terms.
// 7: mixture of experts: expert ranges in weight slices and nodes, expert counts in the dims.
// 9.1: a worker at its handshake capacity answers a connection with one Error frame of origin
//      kBusyOrigin (no new frame: a 9.0 coordinator reports it as the error it is) and closes it;
//      a 9.1 coordinator connects again (connect_worker).
// 9.2: between a 9.2 coordinator and a 9.2 worker, the worker's first session frame is DeviceInfo:
//      the device it serves (name, memory, the weight types each op runs). Either side older: no
//      such frame, and the coordinator assumes a CPU device of unknown memory, as before.
// 10: the graph's dims carry Gemma's scales, sliding windows and their RoPE, the rope's attention
//     factor (LongRoPE), and ops gained GeGlu. Every session opens with 9.2's DeviceInfo.
// 11: gpt-oss: the dims carry the expert gating and the clamped SwiGLU's constants, ops gained
//     SwiGluOai, attention nodes may read sinks and expert nodes biases.
// 12: a step's sequence asks for log-probabilities (its top n raw logits and its slice's
//     log-sum-exp), which its result carries.
// 13: graph nodes carry their reduction granule and the load options --exact (fixed-point sums).
// 14: steps carry reread, keep_logits and candidate_ids (a constrained sequence's plausible tokens
//     sampled again from the logits kept of its step).
// 15: ops gained Scale (Gemma 4's layer output scale); the dims carry each layer's KV heads and
//     head size where layers differ (Gemma 4).
// 16: graph nodes carry Scale's constant factor; MoeRoute and expert matmuls may read a weight
//     (a per-expert scale; rows of a fused gate_up stack) (Gemma 4's mixture of experts).
// 17: ops gained Slice (its offset on the node); the dims carry per-layer FFN widths, the layer
//     whose KV cache each layer reads and the per-layer input width (Gemma 4 E2B/E4B).
// 18: ops gained HeadMatMul and LatentAttention (Rope's offset on the node); the dims carry MLA's
//     widths, the dense first layers and DeepSeek's routing (sigmoid gating, groups, scale) (deepseek2).
// 19: ops gained CausalConv and DeltaNet; weight slices carry runs (stride, repeats); the dims carry
//     Gated DeltaNet's shapes and graphs their recurrent state per slot; a Slice on heads cuts each
//     head (qwen35, qwen35moe).
// 20: the dims carry the order of Gated DeltaNet's value heads (grouped: qwen3next).
// 21: load options carry recurrent state checkpoints, steps the state copies between slots.
inline constexpr uint16_t kProtocolMajor = 21;
inline constexpr uint16_t kProtocolMinor = 0;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMinKeyBytes = 16;
inline constexpr int kHandshakeTimeoutMs = 10000;

struct Version {
  uint16_t major = kProtocolMajor, minor = kProtocolMinor;
};

// The key file's bytes, trailing whitespace removed; at least kMinKeyBytes. Like ssh, refuses a
// file that group or others may read.
std::vector<uint8_t> read_key_file(const std::string& path);
std::vector<uint8_t> random_bytes(size_t n);
std::vector<uint8_t> hmac_sha256(const std::vector<uint8_t>& key, const std::vector<uint8_t>& msg);

// Coordinator side; key empty = no authentication (the worker must then not require one).
// `version` is overridable for tests; timeout_ms bounds each of its waits (a probe asks for less).
// Throws weft::Error("net", ...) naming the peer. Returns the session's MAC (off without a key);
// `worker`, when given, gets the version the worker's challenge said.
SessionMac client_handshake(Socket& s, const std::vector<uint8_t>& key, Version version = {},
                            int timeout_ms = kHandshakeTimeoutMs, Version* worker = nullptr);
// Worker side; key empty = accept any coordinator. The whole handshake must finish within
// timeout_ms. admit runs once the coordinator is authenticated, before the Welcome: it returns ""
// to accept, else the reason sent instead (e.g. busy). On any failure the coordinator gets exactly
// one Error frame, then this throws. `version` is overridable for tests (an older worker);
// `coordinator`, when given, gets the version the coordinator's hello said.
SessionMac server_handshake(Socket& s, const std::vector<uint8_t>& key, int timeout_ms = kHandshakeTimeoutMs,
                            const std::function<std::string()>& admit = {}, Version version = {},
                            Version* coordinator = nullptr);

// Worker side, instead of a handshake: tells the peer the worker is too busy to start one now (an
// Error frame of origin kBusyOrigin, `why` its text), then closes the connection. Bounded by a
// short send timeout; never throws.
inline constexpr const char* kBusyOrigin = "busy";
void refuse_busy(Socket& s, const std::string& why);
// Whether e is that refusal, as client_handshake throws it.
bool is_busy(const Error& e);

// Coordinator side: connect_tcp, then client_handshake (each wait bounded by handshake_timeout_ms),
// tried again while the worker refuses as busy (refuse_busy), after kBusyRetryMs, doubling up to
// kBusyRetryMaxMs, until timeout_ms has passed since the first try; then its last refusal.
inline constexpr int kBusyRetryMs = 50, kBusyRetryMaxMs = 800;
struct Connected {
  Socket socket;
  SessionMac mac;
  Version worker;  // what its challenge said
};
Connected connect_worker(const HostPort& address, const std::vector<uint8_t>& key, int timeout_ms,
                         int handshake_timeout_ms = kHandshakeTimeoutMs);

}  // namespace weft::net
