// Split models as llama-gguf-split writes them: <prefix>-00001-of-0000N.gguf ... -0000N-of-0000N.gguf,
// every part a GGUF of its own holding some of the tensors, each with split.no (0-based),
// split.count and split.tensors.count (the total); the first part also holds all the metadata.
#include "core/error.h"
#include "gguf/gguf_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <set>

namespace weft::gguf {
namespace {

constexpr const char* kSplitNo = "split.no";
constexpr const char* kSplitCount = "split.count";
constexpr const char* kSplitTensors = "split.tensors.count";
constexpr int64_t kMaxParts = 99999;  // five digits in the names

// "-00001-of-00003.gguf": the suffix of part `part` of `count`.
std::string split_suffix(int part, int count) { return fmt::format("-{:05d}-of-{:05d}.gguf", part, count); }

}  // namespace

std::string split_part_path(const std::string& prefix, int part, int count) {
  return prefix + split_suffix(part, count);
}

std::vector<std::string> split_parts_named_by(const std::string& path) {
  // <prefix>-00001-of-NNNNN.gguf: 20 characters after the prefix.
  constexpr size_t kSuffix = 20;
  if (path.size() <= kSuffix) return {};
  const std::string_view tail = std::string_view(path).substr(path.size() - kSuffix);
  int count = 0;
  const std::string_view digits = tail.substr(10, 5);
  if (std::from_chars(digits.data(), digits.data() + digits.size(), count).ptr != digits.data() + digits.size())
    return {};
  if (count < 2 || tail != split_suffix(1, count)) return {};
  const std::string prefix = path.substr(0, path.size() - kSuffix);
  std::vector<std::string> parts;
  for (int k = 1; k <= count; ++k) parts.push_back(split_part_path(prefix, k, count));
  return parts;
}

uint64_t File::total_size() const {
  uint64_t n = size_;
  for (const auto& p : other_parts_) n += p->size_;
  return n;
}

void File::open_split_parts() {
  const std::optional<int64_t> count = get_int_opt(kSplitCount);
  if (!count || *count == 1) return;
  if (*count < 1 || *count > kMaxParts) fail("gguf", "{}: split.count {} is not 1..{}", path_, *count, kMaxParts);
  const int n = static_cast<int>(*count);
  const std::optional<int64_t> no = get_int_opt(kSplitNo);
  if (no != 0) {
    // Name the first part when this one is named as a part.
    std::string first = "<prefix>" + split_suffix(1, n);
    if (no && *no >= 1 && *no < n) {
      const std::string suffix = split_suffix(static_cast<int>(*no) + 1, n);
      if (path_.size() > suffix.size() && path_.compare(path_.size() - suffix.size(), suffix.size(), suffix) == 0)
        first = split_part_path(path_.substr(0, path_.size() - suffix.size()), 1, n);
    }
    fail("gguf", "{}: split.no is {} in a {}-part split model: open its first part, {}", path_,
         no ? fmt::format("{}", *no) : std::string("missing"), n, first);
  }
  const std::vector<std::string> paths = split_parts_named_by(path_);
  if (paths.size() != static_cast<size_t>(n)) {
    fail("gguf", "{}: first part of a {}-part split model, but not named <prefix>{} as llama-gguf-split names it",
         path_, n, split_suffix(1, n));
  }
  const std::optional<int64_t> total = get_int_opt(kSplitTensors);
  if (!total) fail("gguf", "{}: split model without {}", path_, kSplitTensors);

  std::set<std::string> names;
  for (const TensorInfo& t : tensors_) names.insert(t.name);
  for (int k = 2; k <= n; ++k) {
    const std::string& path = paths[k - 1];
    auto where = [&] { return fmt::format("split model {}: part {} of {} ({})", path_, k, n, path); };
    std::unique_ptr<File> part;
    try {
      part = open_one(path);
    } catch (const Error& e) {
      fail("gguf", "{}: {}", where(), e.message());
    }
    if (part->get_int_opt(kSplitCount) != *count)
      fail("gguf", "{}: its {} is {}, the first part's {}", where(), kSplitCount,
           part->get_int_opt(kSplitCount).value_or(-1), n);
    if (part->get_int_opt(kSplitNo) != k - 1)
      fail("gguf", "{}: its {} is {} (expected {})", where(), kSplitNo, part->get_int_opt(kSplitNo).value_or(-1),
           k - 1);
    for (const TensorInfo& t : part->tensors_) {
      if (!names.insert(t.name).second) fail("gguf", "{}: tensor '{}' is also in an earlier part", where(), t.name);
      tensors_.push_back(t);
      tensors_.back().part = static_cast<uint32_t>(k - 1);
    }
    part_paths_.push_back(path);
    other_parts_.push_back(std::move(part));
  }
  if (*total != static_cast<int64_t>(tensors_.size()))
    fail("gguf", "split model {}: {} says {} tensors, its {} parts hold {}", path_, kSplitTensors, *total, n,
         tensors_.size());
}

}  // namespace weft::gguf
