#include "core/text_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weft {

std::string read_text_file(const std::string& path, const char* what, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO nobody writes to would otherwise wait forever; reads below block
  // again once the file is known to be a regular file or a pipe.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cli", "{} {}: cannot open: {}", what, path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cli", "{} {}: cannot stat: {}", what, path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("cli", "{} {}: is a directory, not a file", what, path);
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) fail("cli", "{} {}: not a regular file or a pipe", what, path);
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes)
    fail("cli", "{} {}: {} bytes, more than the limit of {}", what, path, st.st_size, max_bytes);
  if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    fail("cli", "{} {}: fcntl: {}", what, path, std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cli", "{} {}: cannot read: {}", what, path, std::strerror(errno));
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes)
      fail("cli", "{} {}: more than the limit of {} bytes", what, path, max_bytes);
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace weft
