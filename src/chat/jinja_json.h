// JSON data (a request's messages and tools) as template values. nlohmann's ordered_json keeps
// the order keys came in, which tojson then writes back: a tool schema renders as the client
// sent it, as Python's dicts do in transformers.
#pragma once

#include "chat/jinja_value.h"

#include <nlohmann/json.hpp>

namespace weft::chat::jinja {

// Throws weft::Error("chat") for JSON nested deeper than kMaxValueDepth.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace weft::chat::jinja
