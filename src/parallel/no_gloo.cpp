// Built instead of gloo_group.cpp when Gloo is not (-DWEFT_GLOO=OFF, or libgloo-dev missing): a
// single-host build needs nothing network-specific, and a group that spans processes says why it
// cannot be made.
#include "core/error.h"
#include "parallel/gloo_group.h"

namespace weft::parallel {

bool gloo_available() { return false; }

std::unique_ptr<Group> make_gloo_group(int rank, int size, WireType, const GlooOptions&) {
  fail("gloo",
       "rank {} of {}: this weft was built without Gloo, so it cannot join devices in other processes "
       "(install libgloo-dev and rebuild)",
       rank, size);
}

}  // namespace weft::parallel
