#include "parallel/host_shm.h"

#include "core/error.h"
#include "net/handshake.h"
#include "parallel/wire_sum.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>

namespace weft::parallel {
namespace {

constexpr uint32_t kMagic = 0x54464557;  // "WEFT"
constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr size_t kNameHexBytes = 16;

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string ns_link(const char* path) {
  char buf[64];
  const ssize_t n = ::readlink(path, buf, sizeof buf);
  return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Exited, or a zombie not yet reaped (its memory and sockets are gone either way).
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // Read with read(2): a process that exits between kill and the read makes it fail with ESRCH,
  // which libstdc++'s filebuf throws as an exception; that is a gone process, not an error.
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return true;
  const std::string stat(buf, static_cast<size_t>(n));
  const size_t p = stat.rfind(')');  // the command name in parentheses may hold anything
  return p != std::string::npos && p + 2 < stat.size() && (stat[p + 2] == 'Z' || stat[p + 2] == 'X');
}

}  // namespace

// The segment: this header, one line per rank, then two sets of per-rank buffers.
struct HostShm::Header {
  Header(int n, size_t chunk_floats) : magic(kMagic), size(static_cast<uint32_t>(n)), chunk(chunk_floats), barrier(n) {}
  uint32_t magic;
  uint32_t size;
  uint64_t chunk;
  ShmBarrier barrier;
};

// Written only by its rank: the process to watch, and the length of its current round per parity.
struct alignas(kLine) HostShm::RankLine {
  std::atomic<uint64_t> count[2];
  int32_t pid;
};

namespace {
size_t lines_offset() { return round_up(sizeof(HostShm::Header), kLine); }
size_t buffers_offset(int size) { return round_up(lines_offset() + size * sizeof(HostShm::RankLine), kPage); }
size_t segment_bytes(int size, size_t chunk) { return buffers_offset(size) + 2 * size * chunk * sizeof(float); }
}  // namespace

std::string host_identity() {
  const std::string boot = read_first_line("/proc/sys/kernel/random/boot_id");
  std::string id = boot.empty() ? "" : boot + " uid " + std::to_string(::geteuid());
  for (const char* ns : {"/proc/self/ns/mnt", "/proc/self/ns/pid", "/proc/self/ns/net"}) {
    const std::string link = ns_link(ns);
    if (link.empty() || id.empty()) return "";
    id += " " + link;
  }
  return id;
}

std::unique_ptr<HostShm> HostShm::create(int size, size_t chunk) {
  if (size < 1 || chunk == 0 || chunk % (kLine / sizeof(float)) != 0)
    fail("shm", "bad segment shape {} x {}", size, chunk);
  std::string name = "/weft-";
  for (uint8_t b : net::random_bytes(kNameHexBytes)) name += fmt::format("{:02x}", b);
  const size_t bytes = segment_bytes(size, chunk);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) fail("shm", "cannot create shared memory {}: {}", name, std::strerror(errno));
  void* base = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    fail("shm", "cannot map {} bytes of shared memory {}: {}", bytes, name, std::strerror(err));
  }
  new (base) Header(size, chunk);
  return std::unique_ptr<HostShm>(new HostShm(std::move(name), 0, size, chunk, base, bytes));
}

std::unique_ptr<HostShm> HostShm::open(const std::string& name, int rank, int size) {
  const bool well_formed = name.size() == 6 + 2 * kNameHexBytes && name.rfind("/weft-", 0) == 0 &&
                           std::all_of(name.begin() + 6, name.end(),
                                       [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
  if (!well_formed || rank < 1 || rank >= size) fail("shm", "rank {} of {}: bad segment name '{}'", rank, size, name);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) fail("shm", "cannot open shared memory {}: {}", name, std::strerror(errno));
  struct stat st {};
  const bool owned = ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
  const auto bytes = static_cast<size_t>(st.st_size);
  void* base =
      owned && bytes >= sizeof(Header) ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (base == MAP_FAILED) fail("shm", "shared memory {} is not this user's segment", name);
  const auto* h = static_cast<const Header*>(base);
  const size_t chunk = h->chunk;
  if (h->magic != kMagic || h->size != static_cast<uint32_t>(size) || chunk == 0 || chunk > (size_t{1} << 26) ||
      segment_bytes(size, chunk) != bytes) {
    ::munmap(base, bytes);
    fail("shm", "shared memory {} does not hold a group of {}", name, size);
  }
  return std::unique_ptr<HostShm>(new HostShm(name, rank, size, chunk, base, bytes));
}

HostShm::HostShm(std::string name, int rank, int size, size_t chunk, void* base, size_t bytes)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      chunk_(chunk),
      base_(base),
      bytes_(bytes),
      header_(static_cast<Header*>(base)),
      srcs_(size) {
  line(rank_).pid = ::getpid();
}

HostShm::~HostShm() { ::munmap(base_, bytes_); }

void HostShm::unlink() { ::shm_unlink(name_.c_str()); }

HostShm::RankLine& HostShm::line(int rank) const {
  return reinterpret_cast<RankLine*>(static_cast<char*>(base_) + lines_offset())[rank];
}

float* HostShm::buffer(int parity, int rank) const {
  auto* first = reinterpret_cast<float*>(static_cast<char*>(base_) + buffers_offset(size_));
  return first + (static_cast<size_t>(parity) * size_ + rank) * chunk_;
}

void HostShm::check_peers_alive() const {
  const int self = ::getpid();
  for (int k = 0; k < size_; ++k) {
    const int pid = line(k).pid;
    if (k != rank_ && pid > 0 && pid != self && process_gone(pid))
      fail_by_peer("shm", "rank {}: all_reduce failed: rank {} (process {}) has exited", rank_, k, pid);
  }
}

// A round: copy this rank's values into its buffer, one barrier, then every rank sums all buffers
// itself, in rank order. Rounds alternate between two sets of buffers, which is what makes one
// barrier enough: a rank writes a set again two rounds later, after the barrier of the round
// between, which no peer passes before it has finished reading that set.
void HostShm::all_reduce_sum(float* data, size_t n, WireType wire, bool spin, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto on_idle = [&] {
    check_peers_alive();
    if (std::chrono::steady_clock::now() >= deadline)
      fail_by_peer("shm", "rank {}: all_reduce failed: a peer did not arrive within {} ms", rank_, timeout_ms);
  };
  size_t off = 0;
  do {
    const size_t m = std::min(chunk_, n - off);
    if (m != 0) std::memcpy(buffer(parity_, rank_), data + off, m * sizeof(float));  // data may be null when n = 0
    line(rank_).count[parity_].store(m, std::memory_order_relaxed);
    header_->barrier.arrive_and_wait(spin, on_idle);
    for (int k = 0; k < size_; ++k) {
      // Every rank sees the same counts, so all of them throw here together.
      if (line(k).count[parity_].load(std::memory_order_relaxed) != m)
        fail("shm", "all_reduce: ranks called it with different sizes (rank {})", rank_);
      srcs_[k] = buffer(parity_, k);
    }
    float* dst = data + off;
    sum_into(wire, srcs_.data(), size_, &dst, 1, m);
    parity_ ^= 1;
    off += m;
  } while (off < n);
}

void HostShm::abort() { header_->barrier.abort(); }

}  // namespace weft::parallel
