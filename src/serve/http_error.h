// An error a request ends with, as an HTTP status and an OpenAI-style error object:
// {"error": {"message": ..., "type": ..., "code": <status>}} (llama-server's shape).
#pragma once

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <string>

namespace weft::serve {

class HttpError : public Error {
 public:
  HttpError(int status, std::string message) : Error("serve", std::move(message)), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

template <typename... Args>
[[noreturn]] void reject(int status, fmt::format_string<Args...> f, Args&&... args) {
  throw HttpError(status, fmt::format(f, std::forward<Args>(args)...));
}

// OpenAI's error type for a status: invalid_request_error, authentication_error, ...
const char* error_type(int status);
nlohmann::json error_body(int status, const std::string& message);

// Serialises a body; text the model produced may hold invalid UTF-8 (a token that is half a
// character), which becomes U+FFFD instead of failing the reply.
std::string dump(const nlohmann::json& j);

}  // namespace weft::serve
