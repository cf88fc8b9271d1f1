// A forced tool call (tool_choice "required" or a named function): the grammar of a reply that is
// one call (or several, with parallel_tool_calls) in the model's own syntax, each call's arguments
// following its tool's `parameters` schema, for constrained decoding.
#pragma once

#include "chat/tool_call_format.h"
#include "model/grammar.h"
#include "serve/tool_request.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace weft::serve {

// format: the syntax the model's template writes calls in; thinking_open: the generation prompt
// opened <think> (the reply reasons first, closes it, then calls); tools: the request's validated
// OpenAI tools; name: the function to call, empty for any of them. A format weft has no call
// grammar for, or a parameters schema it cannot enforce, is an HttpError(400) naming it.
std::shared_ptr<const model::Grammar> forced_call_grammar(chat::ToolCallFormat format, bool thinking_open,
                                                          const BodyJson& tools, const std::string& name,
                                                          bool parallel);

}  // namespace weft::serve
