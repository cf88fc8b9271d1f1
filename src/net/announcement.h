// The datagrams of LAN discovery (`weft worker --announce`, `--devices auto`): a coordinator's
// query and a worker's announcement. Written field by field (wire.h) and read back bounded: they
// come from anyone on the segment, so every field is checked and a bad datagram is an Error.
// Never carries the key: an announcement only says where to knock; the handshake authenticates.
//
//   u32 magic "WFTA" | u8 kind (1 query, 2 announcement)
//   announcement: u16 protocol major | u16 minor | u16 TCP port | u32 threads | u64 memory bytes |
//                 str name (u32 length + bytes, printable ASCII)
#pragma once

#include "net/handshake.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::net {

inline constexpr uint32_t kAnnounceMagic = 0x41544657;  // "WFTA" little-endian
// An announcement is under 300 bytes; anything longer is not ours (and fits one Ethernet frame).
inline constexpr size_t kMaxDiscoveryDatagramBytes = 512;
inline constexpr size_t kMaxWorkerNameBytes = 255;  // a DNS name's limit
inline constexpr uint32_t kMaxAnnouncedThreads = 1024;

struct Announcement {
  std::string name;   // the worker's host name, for reports (printable ASCII)
  uint16_t port = 0;  // its TCP port; the host is the datagram's source address
  uint32_t threads = 1;
  uint64_t memory_bytes = 0;  // available memory when announced (0: unknown)
  Version version;            // the worker's protocol version, as its handshake would say
};

std::vector<uint8_t> encode_query();
std::vector<uint8_t> encode_announcement(const Announcement& a);
// A query gives nullopt, an announcement its fields (any protocol version: the caller decides).
// Throws weft::Error("net", ...) naming what is wrong: size, magic, kind, a field, trailing bytes.
std::optional<Announcement> decode_discovery(std::span<const uint8_t> datagram);

}  // namespace weft::net
