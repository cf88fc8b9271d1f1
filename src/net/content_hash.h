// SHA-256 content hashes: a model file is named on the wire by its size and the SHA-256 of all of
// its bytes (not a sample: a worker that reads weights from its own copy must have the very same
// file). Hashing a file reads it once per process; later calls for the same path, size and mtime
// return the remembered digest (a 4 GiB model hashes in a few seconds, once).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace weft::net {

inline constexpr size_t kSha256HexChars = 64;

// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::span<const uint8_t> bytes);
// Lower-case hex SHA-256 of a whole file; throws weft::Error("net", ...) naming the path on I/O errors.
std::string sha256_file_hex(const std::string& path);

}  // namespace weft::net
