// Where a worker finds weights without receiving them: a copy of the coordinator's model file in
// --model-dir (matched by size and SHA-256, never by name alone), or a shard it cached after an
// earlier session streamed it (--cache-dir, keyed by slices_key()).
//
// A cache entry is dir/<key>-<SHA-256 of its bytes>.gguf: its name records what it must hold, so
// an entry truncated or damaged on disk is found when it is next used (hashed once per worker
// process and file version, see net/content_hash.h), removed, and streamed again. Entries are the
// worker's copies of someone's weights: files 0600 in a directory 0700. Their total size is capped
// (--cache-max-bytes): storing an entry first removes the least recently used others (last use is
// the entry's access time, set when it is stored and each time cache_find serves it; its mtime is
// left alone, since the hash memo is keyed by it).
#pragma once

#include "device/remote/weight_slices.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::device::remote {

// How the coordinator names its model to workers: the size and SHA-256 of its file, or for a split
// model the total size of its parts and a SHA-256 over their hashes. Unknown for a model parsed
// from memory (nothing a worker could hold a copy of).
ModelId model_id_of(const gguf::File& f);

// $XDG_CACHE_HOME/weft, else $HOME/.cache/weft; empty when neither is set.
std::string default_cache_dir();
// A *.gguf file directly in dir with the model's size and hash, or the first part of a split model
// whose parts are all there and match (files of another size are not read).
std::optional<std::string> find_model(const std::string& dir, const ModelId& model);
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{16} << 30;
// The entry for key whose bytes match the hash in its name, marked used now; entries that do not
// are removed (reported on stderr). None when there is no good entry.
std::optional<std::string> cache_find(const std::string& dir, const std::string& key);
// Writes bytes as key's entry atomically (temporary file 0600, fsync, rename), removes older
// entries for key, and then the least recently used entries of other keys until all of them take
// max_bytes at most; bytes over max_bytes on their own are not stored. A failure is reported on
// stderr and otherwise ignored: the cache only saves a later session from streaming again.
void cache_store(const std::string& dir, const std::string& key, std::span<const uint8_t> bytes,
                 uint64_t max_bytes = kDefaultCacheMaxBytes);

}  // namespace weft::device::remote
