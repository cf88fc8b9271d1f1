// Tokens to a Program: Jinja2's grammar for the statements and expressions chat templates use
// (if/elif/else, for with else and a filter, set in all its forms, macro, call, filter blocks,
// break/continue, generation blocks; the expression precedence of jinja2/parser.py).
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

#include <string_view>

namespace weft::chat::jinja {

// How deep statements and expressions may nest: a template is parsed by recursion, and a hostile
// one ("((((...") must get an error, not a stack overflow.
inline constexpr int kMaxParseDepth = 200;

// Throws weft::Error("chat") naming the line and column of the first syntax error, or of a tag
// the engine does not know (extends, include, import ...).
Program parse(std::string_view source, const LexOptions& options = {});

}  // namespace weft::chat::jinja
