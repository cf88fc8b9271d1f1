// Where a worker finds weights without receiving them: a copy of the coordinator's model file in
// --model-dir (matched by size and SHA-256, never by name alone), or a shard it cached after an
// earlier session streamed it (--cache-dir, keyed by slices_key()).
#pragma once

#include "device/remote/weight_slices.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::device::remote {

// $XDG_CACHE_HOME/weft, else $HOME/.cache/weft; empty when neither is set.
std::string default_cache_dir();
// A *.gguf file directly in dir with the model's size and hash (files of another size are not read).
std::optional<std::string> find_model(const std::string& dir, const ModelId& model);
// dir/<key>.gguf
std::string cache_path(const std::string& dir, const std::string& key);
// Writes bytes to cache_path atomically (temporary file + rename). A failure is reported on stderr
// and otherwise ignored: the cache only saves a later session from streaming again.
void cache_store(const std::string& dir, const std::string& key, const std::vector<uint8_t>& bytes);

}  // namespace weft::device::remote
