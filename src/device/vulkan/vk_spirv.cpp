#include "device/vulkan/vk_spirv.h"

#include <map>
#include <set>
#include <utility>

namespace weft::device::vk {
namespace {

// SPIR-V's opcodes and decorations this reads (the SPIR-V specification, sections 3.20 and 3.32).
constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71, kOpMemberDecorate = 72;
constexpr uint32_t kNonWritable = 24, kBinding = 33, kDescriptorSet = 34;

}  // namespace

uint64_t written_bindings(std::span<const uint32_t> code) {
  constexpr uint64_t kAll = ~uint64_t{0};
  if (code.size() < 5 || code[0] != kMagic) return kAll;
  std::map<uint32_t, uint32_t> binding, set, pointee, type_of;  // by id
  std::map<uint32_t, uint32_t> members;                         // struct id -> member count
  std::set<uint32_t> nonwritable;                               // variables or types
  std::set<std::pair<uint32_t, uint32_t>> nonwritable_member;   // (struct, member)
  for (size_t i = 5; i < code.size();) {
    const uint32_t words = code[i] >> 16, op = code[i] & 0xffff;
    if (words == 0 || i + words > code.size()) return kAll;
    const uint32_t* w = &code[i];
    if (op == kOpDecorate && words >= 3) {
      if (w[2] == kBinding && words >= 4) binding[w[1]] = w[3];
      if (w[2] == kDescriptorSet && words >= 4) set[w[1]] = w[3];
      if (w[2] == kNonWritable) nonwritable.insert(w[1]);
    } else if (op == kOpMemberDecorate && words >= 4 && w[3] == kNonWritable) {
      nonwritable_member.insert({w[1], w[2]});
    } else if (op == kOpTypeStruct && words >= 2) {
      members[w[1]] = words - 2;
    } else if (op == kOpTypePointer && words >= 4) {
      pointee[w[1]] = w[3];
    } else if (op == kOpVariable && words >= 4) {
      type_of[w[2]] = w[1];
    }
    i += words;
  }
  uint64_t written = 0;
  for (const auto& [var, b] : binding) {
    if (b >= 64) return kAll;
    if ((set.count(var) && set[var] != 0) || !type_of.count(var)) continue;
    bool read_only = nonwritable.count(var) > 0;
    const auto block = pointee.find(type_of[var]);
    if (!read_only && block != pointee.end() && members.count(block->second)) {
      const uint32_t s = block->second, n = members[s];
      read_only = n > 0 || nonwritable.count(s);
      for (uint32_t m = 0; m < n; ++m) read_only = read_only && nonwritable_member.count({s, m});
      read_only = read_only || nonwritable.count(s);
    }
    if (!read_only) written |= uint64_t{1} << b;
  }
  return written;
}

}  // namespace weft::device::vk
