// The Vulkan tests run under the Khronos validation layer, synchronisation validation included, and
// fail on any message it sends. A test file that uses vk: devices includes this header, which
// registers, for its whole test binary:
// - an Environment that sets WEFT_VK_VALIDATION=1 before any test runs, so the process's Vulkan
//   instance (created on first use) loads the layer or fails naming it, and every `weft` child
//   process (workers, runs) inherits it; at the end it fails unless vk::validation_messages() is
//   the number of messages tests provoked on purpose (VkValidation.*, which proves the layer runs);
// - a listener that names the tests during which a message came, for that failure.
// A child process prints its messages to its own stderr ("vulkan validation: ..."): tests that start
// one check what it printed with validation_messages_in.
#pragma once

#include "device/vulkan/vk_api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace weft::test_support {

// How the Vulkan layer's messages are printed (device/vulkan/vk_api.cpp), in a child's stderr.
inline constexpr const char* kVkValidationPrefix = "vulkan validation:";

// Messages provoked on purpose so far (not failures).
inline std::atomic<int>& provoked_vk_messages() {
  static std::atomic<int> n{0};
  return n;
}

inline int unexpected_vk_messages() { return device::vk::validation_messages() - provoked_vk_messages().load(); }

// The tests during which an unexpected message came ("A.B, C.D").
inline std::string& vk_message_tests() {
  static std::string names;
  return names;
}

// The lines of `text` (a child's stderr) that the validation layer printed, "" if none.
inline std::string validation_messages_in(const std::string& text) {
  std::string out;
  for (size_t at = text.find(kVkValidationPrefix); at != std::string::npos; at = text.find(kVkValidationPrefix, at + 1))
    out += text.substr(at, text.find('\n', at) - at) + "\n";
  return out;
}

class VkValidationEnvironment : public ::testing::Environment {
 public:
  // At static initialisation: before main, so before any Vulkan instance exists.
  VkValidationEnvironment() { ::setenv("WEFT_VK_VALIDATION", "1", 1); }
  void TearDown() override {
    EXPECT_EQ(unexpected_vk_messages(), 0) << "the Vulkan validation layer sent messages (printed above as '"
                                           << kVkValidationPrefix << " ...') during " << vk_message_tests();
  }
};

class VkValidationWatch : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { before_ = unexpected_vk_messages(); }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (unexpected_vk_messages() == before_) return;
    std::string& names = vk_message_tests();
    names += (names.empty() ? "" : ", ") + std::string(t.test_suite_name()) + "." + t.name();
  }
  int before_ = 0;
};

inline const bool kVkValidationRegistered = [] {
  ::testing::AddGlobalTestEnvironment(new VkValidationEnvironment);
  ::testing::UnitTest::GetInstance()->listeners().Append(new VkValidationWatch);
  return true;
}();

}  // namespace weft::test_support
