#include "device/remote/model_store.h"

#include "core/error.h"
#include "net/content_hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace weft::device::remote {

namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/weft";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/weft";
  return "";
}

namespace {

// The files a model at `path` is read from: a split model's parts, or the file alone.
std::vector<std::string> model_files(const std::string& path) {
  std::vector<std::string> parts = gguf::split_parts_named_by(path);
  return parts.empty() ? std::vector<std::string>{path} : parts;
}

// SHA-256 of one file, or of a split model's parts' hashes in order.
std::string files_hash(const std::vector<std::string>& files) {
  if (files.size() == 1) return net::sha256_file_hex(files[0], /*remember_in_file=*/true);
  std::string all = "weft-split-model/1";
  for (const auto& f : files) {
    all += '\n';
    all += net::sha256_file_hex(f, /*remember_in_file=*/true);
  }
  return net::sha256_hex({reinterpret_cast<const uint8_t*>(all.data()), all.size()});
}

// Total size of the files; nullopt when one is missing or not a regular file.
std::optional<uint64_t> files_size(const std::vector<std::string>& files) {
  uint64_t n = 0;
  for (const auto& f : files) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) return std::nullopt;
    n += fs::file_size(f, ec);
    if (ec) return std::nullopt;
  }
  return n;
}

}  // namespace

ModelId model_id_of(const gguf::File& f) {
  if (f.part_paths().empty()) return {};  // parsed from memory
  return {f.total_size(), files_hash(f.part_paths()), fs::path(f.path()).filename().string()};
}

std::optional<std::string> find_model(const std::string& dir, const ModelId& model) {
  if (!model.known()) return std::nullopt;
  std::error_code ec;
  std::vector<std::vector<std::string>> candidates;  // each: a model's files, the first named as the model
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (e.path().extension() != ".gguf" || !e.is_regular_file(e2)) continue;
    std::vector<std::string> files = model_files(e.path().string());
    if (files_size(files) != model.size) continue;
    // The coordinator's file name first: usually the only one that needs hashing.
    if (e.path().filename() == model.file_name)
      candidates.insert(candidates.begin(), std::move(files));
    else
      candidates.push_back(std::move(files));
  }
  if (ec) fail("worker", "--model-dir '{}': {}", dir, ec.message());
  for (const auto& files : candidates)
    if (files_hash(files) == model.sha256) return files[0];
  return std::nullopt;
}

namespace {

// The entries for key in dir: <key>-<hash>.gguf; with temporaries, also the <key>-<hash>.gguf.tmp<pid>
// files that writers killed mid-write leave behind.
std::vector<fs::path> cache_entries(const std::string& dir, const std::string& key, bool temporaries = false) {
  std::vector<fs::path> out;
  std::error_code ec;
  const size_t n = key.size() + 1 + net::kSha256HexChars + 5;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(key + "-", 0) != 0 || name.size() < n || name.compare(n - 5, 5, ".gguf") != 0) continue;
    if (name.size() == n || (temporaries && name.compare(n, 4, ".tmp") == 0)) out.push_back(e.path());
  }
  return out;
}

// Every entry in dir, of any key: <key>-<64 hex digits>.gguf.
std::vector<fs::path> all_cache_entries(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t n = name.size(), hex = net::kSha256HexChars;
    if (n < hex + 7 || name.compare(n - 5, 5, ".gguf") != 0 || name[n - 5 - hex - 1] != '-') continue;
    const std::string digits = name.substr(n - 5 - hex, hex);
    if (digits.find_first_not_of("0123456789abcdef") == std::string::npos) out.push_back(e.path());
  }
  return out;
}

// Last use: the access time (set explicitly, so noatime mounts keep it too).
void mark_used(const fs::path& p) {
  const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};  // atime now, mtime as it is
  ::utimensat(AT_FDCWD, p.c_str(), times, 0);
}

// Removes the least recently used entries but `keep` until the entries take max_bytes at most.
void evict(const std::string& dir, const fs::path& keep, uint64_t max_bytes) {
  struct Entry {
    fs::path path;
    uint64_t bytes;
    timespec used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  for (const fs::path& p : all_cache_entries(dir)) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    total += static_cast<uint64_t>(st.st_size);
    if (p != keep) entries.push_back({p, static_cast<uint64_t>(st.st_size), st.st_atim});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    std::error_code ec;
    if (!fs::remove(e.path, ec)) continue;
    total -= e.bytes;
    std::fprintf(stderr, "weft worker: cache entry %s removed (least recently used; --cache-max-bytes %llu)\n",
                 e.path.filename().c_str(), static_cast<unsigned long long>(max_bytes));
  }
}

// Writes all of bytes to path (0600: someone's weights) and flushes them to the disk.
bool write_durably(const std::string& path, std::span<const uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::fchmod(fd, 0600);  // a leftover file of the same name kept its mode
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  const bool ok = at == bytes.size() && ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

}  // namespace

std::optional<std::string> cache_find(const std::string& dir, const std::string& key) {
  for (const fs::path& p : cache_entries(dir, key)) {
    const std::string name = p.filename().string();
    const std::string want = name.substr(key.size() + 1, net::kSha256HexChars);
    std::string got;
    try {
      got = net::sha256_file_hex(p.string());
    } catch (const Error&) {  // unreadable: as bad as damaged
    }
    if (got == want) {
      mark_used(p);
      return p.string();
    }
    std::error_code ec;
    fs::remove(p, ec);
    std::fprintf(stderr, "weft worker: cache entry %s is damaged (its bytes do not match its hash); removed\n",
                 p.string().c_str());
  }
  return std::nullopt;
}

void cache_store(const std::string& dir, const std::string& key, std::span<const uint8_t> bytes, uint64_t max_bytes) {
  if (bytes.size() > max_bytes) {
    std::fprintf(stderr, "weft worker: weights of %zu bytes not cached: over --cache-max-bytes %llu\n", bytes.size(),
                 static_cast<unsigned long long>(max_bytes));
    return;
  }
  const std::string path = dir + "/" + key + "-" + net::sha256_hex(bytes) + ".gguf";
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);  // 0700, as ssh keeps ~/.ssh
  for (const fs::path& old : cache_entries(dir, key, /*temporaries=*/true))
    if (old != path) fs::remove(old, ec);
  if (write_durably(tmp, bytes) && std::rename(tmp.c_str(), path.c_str()) == 0) {
    mark_used(path);
    evict(dir, path, max_bytes);
    return;
  }
  fs::remove(tmp, ec);
  std::fprintf(stderr, "weft worker: could not cache weights in %s (continuing without)\n", dir.c_str());
}

}  // namespace weft::device::remote
