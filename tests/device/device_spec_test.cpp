// --devices through the kind registry: every registered kind parses and names its entries, and an
// entry no kind owns is an error listing them all.
#include "device/device_spec.h"
#include "device/device_kind.h"
#include "support/expect_error.h"

#include <gtest/gtest.h>

namespace weft::device {
namespace {

TEST(DeviceSpec, EveryFormParsesAndNamesItselfBack) {
  const auto specs = parse_devices("cpu:3,tcp://10.0.0.2:7070,cpu:2@0,cpu");
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].kind, DeviceSpec::Kind::Cpu);
  EXPECT_EQ(specs[0].threads, 3);
  EXPECT_EQ(specs[1].kind, DeviceSpec::Kind::Remote);
  EXPECT_EQ(specs[1].address, "10.0.0.2:7070");
  EXPECT_EQ(specs[2].numa_node, 0);
  EXPECT_EQ(specs[3].threads, 1);
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(describe(s));
  EXPECT_EQ(names, (std::vector<std::string>{"cpu:3", "tcp://10.0.0.2:7070", "cpu:2@0", "cpu:1"}));
}

TEST(DeviceSpec, UnknownPrefixListsEveryRegisteredKind) {
  EXPECT_ERROR(parse_devices("cpu:1,gpu:0"),
               "unknown device 'gpu:0' (expected cpu:THREADS[@NUMA] or vk:N or tcp://HOST:PORT)");
  for (const auto& k : device_kinds()) EXPECT_ERROR(parse_devices("xyz"), std::string(k.syntax));
}

TEST(DeviceSpec, MalformedEntriesNameThemselves) {
  EXPECT_ERROR(parse_devices("cpu:0"), "'cpu:0': '0' is not a number in 1..1024");
  EXPECT_ERROR(parse_devices("cpu:2@x"), "'cpu:2@x': 'x' is not a number");
  EXPECT_ERROR(parse_devices("cpux"), "unknown device 'cpux'");
  EXPECT_ERROR(parse_devices("tcp://host"), "'tcp://host' needs host:port");
  EXPECT_ERROR(parse_devices("cpu:1,,cpu:1"), "empty entry");
}

TEST(DeviceSpec, CpuDevicesAreNumberedWithinTheirKind) {
  const auto devices = create_devices(parse_devices("cpu:1,cpu:1"));
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]->name(), "cpu:0");
  EXPECT_EQ(devices[1]->name(), "cpu:1");
  EXPECT_EQ(devices[1]->threads(), 1);
}

TEST(DeviceSpec, EveryKindSaysWhatThisMachineOffers) {
  for (const auto& k : device_kinds()) EXPECT_FALSE(k.list_local().empty()) << k.prefix;
}

}  // namespace
}  // namespace weft::device
