#include "net/content_hash.h"

#include "core/error.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace weft::net {
namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) fail("net", "SHA-256 init failed");
  }
  void update(const void* p, size_t n) {
    if (EVP_DigestUpdate(ctx_.get(), p, n) != 1) fail("net", "SHA-256 update failed");
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1) fail("net", "SHA-256 final failed");
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (unsigned i = 0; i < len; ++i) {
      s += digits[md[i] >> 4];
      s += digits[md[i] & 15];
    }
    return s;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string hash_file(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail("net", "cannot open '{}': {}", path, std::strerror(errno));
  Sha256 h;
  std::vector<char> buf(4 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) h.update(buf.data(), n);
  if (std::ferror(f.get())) fail("net", "error reading '{}'", path);
  return h.hex();
}

}  // namespace

std::string sha256_hex(std::span<const uint8_t> bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

std::string sha256_file_hex(const std::string& path, bool remember_in_file) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("net", "cannot stat '{}': {}", path, std::strerror(errno));
  // (path, size, mtime) -> digest: a file rewritten in place gets a new mtime and is hashed again.
  // Concurrent callers for one file (devices loading in parallel) share a single read of it.
  using Key = std::tuple<std::string, int64_t, int64_t, int64_t, bool>;
  static std::mutex mu;
  static std::map<Key, std::shared_future<std::string>> memo;
  const Key key{path, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, remember_in_file};
  std::promise<std::string> mine;
  std::shared_future<std::string> result;
  {
    std::lock_guard lock(mu);
    if (auto it = memo.find(key); it != memo.end()) return it->second.get();
    result = memo[key] = mine.get_future().share();
  }
  try {
    // The record in the file: "<size> <mtime s> <mtime ns> <digest>", valid while size and mtime are.
    const std::string stamp = fmt::format("{} {} {} ", st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    std::string hex;
    if (remember_in_file) {
      char buf[128];
      const ssize_t n = ::getxattr(path.c_str(), kDigestXattr, buf, sizeof(buf));
      const std::string rec = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
      if (rec.size() == stamp.size() + kSha256HexChars && rec.rfind(stamp, 0) == 0) hex = rec.substr(stamp.size());
    }
    if (hex.empty()) {
      hex = hash_file(path);
      // Best effort: a read-only file or a file system without user xattrs is hashed each time.
      if (remember_in_file) ::setxattr(path.c_str(), kDigestXattr, (stamp + hex).data(), stamp.size() + hex.size(), 0);
    }
    mine.set_value(hex);
  } catch (...) {
    mine.set_exception(std::current_exception());
    std::lock_guard lock(mu);
    memo.erase(key);  // a failed read is not remembered
  }
  return result.get();
}

}  // namespace weft::net
