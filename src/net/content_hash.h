// SHA-256 content hashes: a model file is named on the wire by its size and the SHA-256 of all of
// its bytes (not a sample: a worker that reads weights from its own copy must have the very same
// file). Hashing a file reads it once per process; later calls for the same path, size and mtime
// return the remembered digest (a 4 GiB model hashes in a few seconds, once). Model files also
// keep their digest in an extended attribute (kDigestXattr, stamped with the size and mtime it
// was computed for), so the next process does not read the file again either.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace weft::net {

inline constexpr size_t kSha256HexChars = 64;

// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::span<const uint8_t> bytes);
inline constexpr const char* kDigestXattr = "user.weft.sha256";

// Lower-case hex SHA-256 of a whole file; throws weft::Error("net", ...) naming the path on I/O errors.
// remember_in_file: use and keep the kDigestXattr record (model files; a cache entry is verified
// by reading it, once per process).
std::string sha256_file_hex(const std::string& path, bool remember_in_file = false);

}  // namespace weft::net
