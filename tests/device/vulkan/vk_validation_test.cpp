// The Vulkan tests' validation is real: with WEFT_VK_VALIDATION=1 (support/vk_validation.h sets it
// for every test binary that uses vk: devices) the Khronos layer runs with synchronisation
// validation, and a hazard recorded on purpose is caught and counted, so a layer that is silently
// missing or a sync check that is off cannot let the other Vulkan tests pass on zero messages.
#include "support/vk_validation.h"
#include "device/vulkan/vk_api.h"
#include "device/vulkan/vk_gpu.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace weft::device::vk {
namespace {

TEST(VkValidation, TheEnvironmentAsksForTheLayer) {
  const char* env = std::getenv("WEFT_VK_VALIDATION");
  ASSERT_NE(env, nullptr);
  EXPECT_EQ(std::string(env), "1");
  EXPECT_TRUE(instance().validation) << "the Vulkan instance was created without the validation layer";
}

// Two fills of one buffer with no barrier between them: a write-after-write hazard that lavapipe,
// which runs a command buffer's commands in order, forgives, and that only synchronisation
// validation reports (SYNC-HAZARD-WRITE-AFTER-WRITE). The Gpu records the barrier itself for a
// buffer it tracks; one marked untracked gets none, which is how the hazard is made here.
TEST(VkValidation, SynchronisationValidationCatchesAMissingBarrier) {
  Gpu gpu(0);
  Buffer b = gpu.create_buffer(256, Memory::Device, "hazard");
  const int before = validation_messages();
  gpu.untracked(b.buffer);
  gpu.begin();
  gpu.fill_zero(b.buffer, 0, 256);
  gpu.fill_zero(b.buffer, 0, 256);  // no barrier between: the hazard
  gpu.submit();
  const int provoked = validation_messages() - before;
  test_support::provoked_vk_messages() += provoked;
  EXPECT_GT(provoked, 0) << "no message for a write-after-write hazard: synchronisation validation is not running";
  // The same two fills of a tracked buffer: the Gpu puts a barrier between them, and no message.
  const int clean = validation_messages();
  gpu.untracked(VK_NULL_HANDLE);
  gpu.begin();
  gpu.fill_zero(b.buffer, 0, 256);
  gpu.fill_zero(b.buffer, 0, 256);
  gpu.submit();
  EXPECT_EQ(validation_messages(), clean);
  gpu.destroy(b);
}

}  // namespace
}  // namespace weft::device::vk
