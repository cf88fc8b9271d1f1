// A Jinja template's source cut into tokens: text between tags, and the tokens inside {{ }} and
// {% %} tags ({# #} comments are dropped). Whitespace control is applied here, as Jinja2's lexer
// does: `-` inside a tag's delimiter strips the whitespace beside it, and the environment
// Hugging Face transformers renders chat templates with sets trim_blocks (the newline after a
// block or comment tag goes) and lstrip_blocks (spaces and tabs before a block or comment tag on
// its own line go; `{%+` keeps them). Newlines are normalised to "\n" and one trailing newline
// of the source is dropped (Jinja2's keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::chat::jinja {

// Where a token or a node starts in the source, 1-based.
struct Pos {
  int line = 0, col = 0;
};

enum class Tok {
  Text,        // text outside tags (text: the text)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifiers and keywords (text)
  String,      // a string literal, escapes resolved (text)
  Int,         // (int_value)
  Float,       // (float_value)
  Op,          // an operator or bracket (text: "+", "//", "(", ...)
  Eof,
};

struct Token {
  Tok kind;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  Pos pos;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws weft::Error("chat") naming the line and column of an unclosed tag, comment or string,
// or a character no token starts with.
std::vector<Token> lex(std::string_view source, const LexOptions& options = {});

}  // namespace weft::chat::jinja
