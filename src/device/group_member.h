// A local device's membership of its tensor-parallel group (Device::begin_join / finish_join): an
// in-process group's handle is taken at once; a network rank connects on a thread of its own
// while the other ranks connect too.
#pragma once

#include "device/device.h"

#include <exception>
#include <memory>
#include <thread>
#include <vector>

namespace weft::device {

class GroupMember {
 public:
  ~GroupMember();
  void begin(GroupJoin join);
  // Waits for a network join; its failure, if it failed (taken).
  std::exception_ptr finish();
  parallel::Group* group() const { return group_.get(); }
  void abort() {
    if (group_) group_->abort();
  }
  std::string_view transport() const { return group_ ? group_->transport() : ""; }

 private:
  std::unique_ptr<parallel::Group> group_;
  std::thread joining_;
  std::exception_ptr error_;
};

// The group's all-gather of a Split value into rows: in holds this rank's [n_tokens, its range]
// slice, out gets [n_tokens, width] with every rank's range in place (tmp: scratch).
void all_gather_rows(parallel::Group& g, const float* in, const std::vector<parallel::Range>& ranges, int64_t n_tokens,
                     int64_t width, std::vector<float>& tmp, float* out);

}  // namespace weft::device
