#include "serve/http_error.h"

namespace weft::serve {

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json error_body(int status, const std::string& message) {
  return {{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}};
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace weft::serve
