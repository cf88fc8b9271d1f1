// Load options on the wire: what the coordinator writes the worker reads back, KV cache types
// included; values a worker must not act on are errors naming the field.
#include "device/remote/remote_messages.h"
#include "core/error.h"
#include "net/wire.h"

#include <gtest/gtest.h>

namespace weft::device::remote {
namespace {

LoadOptions round_trip(const LoadOptions& o) {
  net::ByteWriter w;
  write_load_options(w, o);
  net::ByteReader r(w.data());
  const LoadOptions back = read_load_options(r);
  r.finish("load options");
  return back;
}

TEST(RemoteMessages, LoadOptionsRoundTripWithCacheTypes) {
  for (DType k : {DType::F16, DType::F32})
    for (DType v : {DType::F16, DType::F32}) {
      const LoadOptions back = round_trip({1024, 64, k, v});
      EXPECT_EQ(back.n_ctx, 1024);
      EXPECT_EQ(back.max_tokens, 64);
      EXPECT_EQ(back.k_type, k);
      EXPECT_EQ(back.v_type, v);
    }
}

TEST(RemoteMessages, LoadOptionsRejectOtherCacheTypesAndBadSizes) {
  EXPECT_THROW(round_trip({1024, 64, DType::Q8_0, DType::F16}), Error);
  EXPECT_THROW(round_trip({1024, 64, DType::F16, static_cast<DType>(999)}), Error);
  EXPECT_THROW(round_trip({0, 64, DType::F16, DType::F16}), Error);
  EXPECT_THROW(round_trip({1024, 0, DType::F16, DType::F16}), Error);
  net::ByteWriter w;  // truncated: the cache types are missing
  w.i32(1024);
  w.i32(64);
  net::ByteReader r(w.data());
  EXPECT_THROW(read_load_options(r), Error);
}

}  // namespace
}  // namespace weft::device::remote
