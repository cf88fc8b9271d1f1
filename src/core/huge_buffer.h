// Anonymous memory advised onto 2 MiB pages, for what a step streams through every time (weights,
// the KV cache): with 4 KiB pages such a stream takes a TLB miss every few rows, each a two-level
// walk in a VM. The advice is only advice: without transparent huge pages it still works on 4 KiB
// pages. The kernel hands the pages out zero-filled, on first touch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // n bytes (none allocated for 0); fails with weft::Error in `layer`, naming `what`. huge = false
  // advises 4 KiB pages instead (benchmarks compare the two).
  HugeBuffer(size_t n, const char* layer, const char* what, bool huge = true);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& o) noexcept;
  HugeBuffer& operator=(HugeBuffer&& o) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  // Backs every page now (MADV_POPULATE_WRITE), so that first use pays no page faults (a KV
  // cache: else the first requests fault in its pages step by step). False where the kernel
  // could not (no memory, or a kernel before 5.14): the pages then come on first use, as before.
  bool populate();

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace weft
