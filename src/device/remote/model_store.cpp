#include "device/remote/model_store.h"

#include "core/error.h"
#include "net/content_hash.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace weft::device::remote {

namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/weft";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/weft";
  return "";
}

std::optional<std::string> find_model(const std::string& dir, const ModelId& model) {
  if (!model.known()) return std::nullopt;
  std::error_code ec;
  std::vector<std::string> candidates;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (e.path().extension() != ".gguf" || !e.is_regular_file(e2) || e.file_size(e2) != model.size) continue;
    // The coordinator's file name first: usually the only one that needs hashing.
    if (e.path().filename() == model.file_name) candidates.insert(candidates.begin(), e.path().string());
    else candidates.push_back(e.path().string());
  }
  if (ec) fail("worker", "--model-dir '{}': {}", dir, ec.message());
  for (const auto& path : candidates)
    if (net::sha256_file_hex(path) == model.sha256) return path;
  return std::nullopt;
}

std::string cache_path(const std::string& dir, const std::string& key) { return dir + "/" + key + ".gguf"; }

void cache_store(const std::string& dir, const std::string& key, const std::vector<uint8_t>& bytes) {
  const std::string path = cache_path(dir, key), tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!ec && out.flush()) {
      out.close();
      if (std::rename(tmp.c_str(), path.c_str()) == 0) return;
    }
  }
  fs::remove(tmp, ec);
  std::fprintf(stderr, "weft worker: could not cache weights in %s (continuing without)\n", dir.c_str());
}

}  // namespace weft::device::remote
