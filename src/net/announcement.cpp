#include "net/announcement.h"

#include "core/error.h"
#include "net/wire.h"

#include <algorithm>

namespace weft::net {
namespace {

enum class Kind : uint8_t { Query = 1, Announcement = 2 };

ByteWriter header(Kind k) {
  ByteWriter w;
  w.u32(kAnnounceMagic);
  w.u8(static_cast<uint8_t>(k));
  return w;
}

uint16_t read_u16(ByteReader& r, const char* what) {
  const uint32_t lo = r.u8(what), hi = r.u8(what);
  return static_cast<uint16_t>(lo | hi << 8);
}
void write_u16(ByteWriter& w, uint16_t v) {
  w.u8(static_cast<uint8_t>(v));
  w.u8(static_cast<uint8_t>(v >> 8));
}

// Names are printed on the coordinator's terminal: no control bytes or escapes from strangers.
bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

}  // namespace

std::vector<uint8_t> encode_query() { return std::move(header(Kind::Query).data()); }

std::vector<uint8_t> encode_announcement(const Announcement& a) {
  if (a.name.empty() || a.name.size() > kMaxWorkerNameBytes || !printable(a.name))
    fail("net", "announcement: name '{}' is not 1..{} printable characters", a.name, kMaxWorkerNameBytes);
  ByteWriter w = header(Kind::Announcement);
  write_u16(w, a.version.major);
  write_u16(w, a.version.minor);
  write_u16(w, a.port);
  w.u32(a.threads);
  w.u64(a.memory_bytes);
  w.str(a.name);
  return std::move(w.data());
}

std::optional<Announcement> decode_discovery(std::span<const uint8_t> datagram) {
  if (datagram.size() > kMaxDiscoveryDatagramBytes)
    fail("net", "discovery datagram of {} bytes, at most {}", datagram.size(), kMaxDiscoveryDatagramBytes);
  ByteReader r(datagram);
  const uint32_t magic = r.u32("magic");
  if (magic != kAnnounceMagic) fail("net", "discovery datagram: bad magic {:#010x}", magic);
  const uint8_t kind = r.u8("kind");
  if (kind == static_cast<uint8_t>(Kind::Query)) {
    r.finish("discovery query: trailing bytes");
    return std::nullopt;
  }
  if (kind != static_cast<uint8_t>(Kind::Announcement)) fail("net", "discovery datagram: unknown kind {}", kind);
  Announcement a;
  a.version.major = read_u16(r, "protocol major");
  a.version.minor = read_u16(r, "protocol minor");
  a.port = read_u16(r, "port");
  if (a.port == 0) fail("net", "announcement: port 0");
  a.threads = r.u32("threads");
  if (a.threads < 1 || a.threads > kMaxAnnouncedThreads)
    fail("net", "announcement: {} threads, expected 1..{}", a.threads, kMaxAnnouncedThreads);
  a.memory_bytes = r.u64("memory");
  a.name = r.str("name", kMaxWorkerNameBytes);
  if (a.name.empty() || !printable(a.name)) fail("net", "announcement: the name is empty or not printable ASCII");
  r.finish("announcement: trailing bytes");
  return a;
}

}  // namespace weft::net
