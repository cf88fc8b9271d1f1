// libFuzzer target: the discovery datagram decoder, which workers and coordinators run on bytes
// from anyone on the segment. Any input must give a value or weft::Error, never a crash; what
// decodes must encode back to the same bytes.
#include "core/error.h"
#include "net/announcement.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  try {
    const std::span<const uint8_t> in(data, size);
    const std::optional<net::Announcement> a = net::decode_discovery(in);
    const std::vector<uint8_t> again = a ? net::encode_announcement(*a) : net::encode_query();
    if (!std::equal(again.begin(), again.end(), in.begin(), in.end())) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
