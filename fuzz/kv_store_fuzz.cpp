// libFuzzer target: the rendezvous store's messages (what KvServer decodes from anyone who can
// connect) and the tag check a reader runs on a stored value. Any input must give a value or
// weft::Error, never a crash, an unbounded allocation or a forged entry accepted.
#include "core/error.h"
#include "net/frame.h"
#include "net/kv_store.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  if (size < 1) return 0;
  const std::span<const uint8_t> body(data + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: net::read_kv_set(body); break;
      case 1: net::read_kv_get(body); break;
      case 2: {  // a whole frame as the server reads it: header, then the payload it announces
        if (body.size() < net::kFrameHeaderBytes) break;
        net::MsgType t;
        const uint32_t len = net::parse_frame_header(body.first<net::kFrameHeaderBytes>(), t);
        if (len > body.size() - net::kFrameHeaderBytes) break;
        const auto payload = body.subspan(net::kFrameHeaderBytes, len);
        if (t == net::MsgType::KvSet) net::read_kv_set(payload);
        if (t == net::MsgType::KvGet) net::read_kv_get(payload);
        break;
      }
      default: {  // a stored value under a fixed group key: random bytes must never verify
        static const std::vector<uint8_t> group = net::rendezvous_key(std::vector<uint8_t>(20, 'k'), "fuzz");
        net::open_entry(group, "rank0", std::vector<char>(body.begin(), body.end()));
        __builtin_trap();  // a 128-bit tag guessed by a fuzzer: a broken check
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
