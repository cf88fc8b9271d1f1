// Structured output: what a request asks its reply to follow, as one grammar for constrained
// decoding (model/grammar.h). OpenAI's `response_format` ({"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"schema": ...}}) and llama-server's own fields,
// `json_schema` (a schema) and `grammar` (GBNF text). Each bad value, and each part of a schema
// weft cannot enforce, is an HttpError(400) naming it.
#pragma once

#include "model/grammar.h"
#include "serve/tool_request.h"

#include <nlohmann/json.hpp>

#include <memory>

namespace weft::serve {

// The grammar the body asks for; null when it asks for none (or response_format "text").
std::shared_ptr<const model::Grammar> parse_output_constraint(const BodyJson& body);

}  // namespace weft::serve
