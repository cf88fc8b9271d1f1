// The parsed template: expressions and statements as plain nodes, each with the position it
// starts at so that a render error can name it. One node type per family, its kind saying which
// fields are used, keeps the parser and the interpreter each one switch.
#pragma once

#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,       // value
    Name,          // name
    ListLiteral,   // items
    TupleLiteral,  // items
    DictLiteral,   // items: key, value, key, value ...
    Unary,         // op ("-", "+", "not") a
    Binary,        // a op b: + - * / // % ** ~ and or in "not in"
    Compare,       // items[0] ops[0] items[1] ops[1] items[2] ... (chained, as Python's)
    Ternary,       // a if b else c (c null: undefined)
    Attr,          // a.name
    Index,         // a[b]
    Slice,         // a[items[0] : items[1] : items[2]] (null: left out)
    Call,          // a(items..., kwargs...)
    Filter,        // a | name(items..., kwargs...); a null inside {% filter %} and {% set x | f %}
    Test,          // a is [not] name(items...)
  };
  Kind kind;
  Pos pos;
  Value value;
  std::string name;  // Name, Attr, Filter, Test; the operator of Unary / Binary
  std::vector<std::string> ops;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // Test: `is not`
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// A macro's parameter and its default (null: none).
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // conditions[i] -> bodies[i]; else_body
    For,          // for targets in expr [if cond] body [else else_body]
    Set,          // targets = expr, or attr target (targets[0].name), or block set (body, filter in expr2)
    Macro,        // name(params) body
    CallBlock,    // call(params) expr(...) body
    FilterBlock,  // expr (a Filter chain on nothing) applied to body
    Break,
    Continue,
  };
  Kind kind;
  Pos pos;
  std::string text;                  // Text; Macro's name; Set's attribute (ns.attr) when non-empty
  ExprPtr expr;                      // Output, For's iterable, Set's value, CallBlock's call, FilterBlock's filters
  ExprPtr cond;                      // For's filter; Set's filter on a block
  std::vector<std::string> targets;  // For, Set
  bool unpack = false;               // For / Set: targets were written as a tuple
  std::vector<ExprPtr> conditions;   // If
  std::vector<Body> bodies;          // If
  Body body, else_body;
  std::vector<Param> params;  // Macro, CallBlock
};

struct Program {
  Body body;
};

}  // namespace weft::chat::jinja
