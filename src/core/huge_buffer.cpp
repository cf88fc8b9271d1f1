#include "core/huge_buffer.h"

#include "core/error.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace weft {

HugeBuffer::HugeBuffer(size_t n, const char* layer, const char* what, bool huge) : n_(n) {
  if (n == 0) return;
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail(layer, "cannot allocate {} bytes for {}: {}", n, what, std::strerror(errno));
  ::madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  p_ = static_cast<uint8_t*>(p);
}

bool HugeBuffer::populate() {
  if (!p_) return true;
#ifdef MADV_POPULATE_WRITE
  return ::madvise(p_, n_, MADV_POPULATE_WRITE) == 0;
#else
  return false;
#endif
}

HugeBuffer::~HugeBuffer() {
  if (p_) ::munmap(p_, n_);
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) ::munmap(p_, n_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}

}  // namespace weft
