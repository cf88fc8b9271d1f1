#include "runtime/text_stream.h"

#include <algorithm>
#include <utility>

namespace weft::runtime {

namespace {
// Bytes of the UTF-8 sequence a lead byte starts (1 for ASCII and for bytes that cannot lead).
size_t utf8_length(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4) return 4;
  if (c >= 0xE0) return c <= 0xEF ? 3 : 1;
  if (c >= 0xC2) return 2;
  return 1;
}
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }
}  // namespace

size_t complete_utf8_prefix(std::string_view s) {
  // Only the last 3 bytes can belong to an unfinished sequence; look for its lead byte there.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if (is_continuation(c)) continue;
    const size_t need = utf8_length(c);
    if (need <= back) return n;  // a complete sequence (or a lone byte) ends the string
    for (size_t k = 1; k < back; ++k)
      if (!is_continuation(static_cast<unsigned char>(s[n - back + k]))) return n;  // already invalid
    return n - back;
  }
  return n;  // only continuation bytes in the last 3: stray, never completed by what follows
}

size_t partial_stop_suffix(std::string_view s, std::string_view stop) {
  for (size_t len = std::min(s.size(), stop.size() - (stop.empty() ? 0 : 1)); len > 0; --len)
    if (s.substr(s.size() - len) == stop.substr(0, len)) return len;
  return 0;
}

TextStream::TextStream(const tokenizer::Tokenizer& tok, std::vector<std::string> stop)
    : tok_(tok), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

bool TextStream::push(Token t) {
  if (stopped_) return true;
  held_ += tok_.piece(t);
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    ready_ += held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return true;
  }
  release();
  return false;
}

void TextStream::release() {
  size_t keep = 0;  // the longest tail that may still grow into a stop string
  for (const auto& s : stop_) keep = std::max(keep, partial_stop_suffix(held_, s));
  const size_t n = complete_utf8_prefix(std::string_view(held_).substr(0, held_.size() - keep));
  ready_.append(held_, 0, n);
  held_.erase(0, n);
}

std::string TextStream::take() { return std::exchange(ready_, {}); }

std::string TextStream::finish() {
  ready_ += std::exchange(held_, {});
  return take();
}

}  // namespace weft::runtime
