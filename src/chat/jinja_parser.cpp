// A recursive-descent parser following jinja2/parser.py: expressions from the conditional down
// (or, and, not, comparisons, + -, ~, * / // %, **, unary, then postfix, filters and tests), and
// statements read between {% %} tags until the end tag their parent expects.
#include "chat/jinja_parser.h"

#include "core/error.h"

#include <algorithm>
#include <initializer_list>

namespace weft::chat::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Program program() {
    Program p;
    p.body = body({});
    if (peek().kind != Tok::Eof) error(peek().pos, "unexpected '{% " + peek(1).text + " %}'");
    return p;
  }

 private:
  // ---- tokens ----
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Op && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::Name && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Text: return "text";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "'}}'";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "'%}'";
      case Tok::Eof: return "the end of the template";
      case Tok::String: return "a string";
      case Tok::Int:
      case Tok::Float: return "a number";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(peek().pos, "expected '" + std::string(op) + "', found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().kind != Tok::Name) error(peek().pos, "expected a name, found " + describe(peek()));
    return next().text;
  }
  void expect(Tok kind, const char* what) {
    if (peek().kind != kind) error(peek().pos, std::string("expected ") + what + ", found " + describe(peek()));
    next();
  }
  [[noreturn]] static void error(Pos p, const std::string& what) {
    fail("chat", "jinja template line {}, column {}: {}", p.line, p.col, what);
  }

  // Nesting guard: every recursive entry holds one.
  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth)
        error(p_.peek().pos, "the template nests deeper than " + std::to_string(kMaxParseDepth) + " levels");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  // ---- statements ----
  // Statements until a {% tag named in `ends` (left unread) or the end.
  Body body(std::initializer_list<std::string_view> ends) {
    Depth d(*this);
    Body out;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::Eof) {
        if (ends.size() != 0) error(t.pos, "missing '{% " + std::string(*ends.begin()) + " %}'");
        return out;
      }
      if (t.kind == Tok::Text) {
        auto s = node(Stmt::Kind::Text, t.pos);
        s->text = next().text;
        out.push_back(std::move(s));
      } else if (t.kind == Tok::VarBegin) {
        auto s = node(Stmt::Kind::Output, next().pos);
        s->expr = tuple(true);
        expect(Tok::VarEnd, "'}}'");
        out.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        const Token& name = peek(1);
        if (name.kind == Tok::Name && std::find(ends.begin(), ends.end(), name.text) != ends.end()) return out;
        next();
        if (auto s = statement()) out.push_back(std::move(s));
      } else {
        error(t.pos, "unexpected " + describe(t));
      }
    }
  }

  static std::unique_ptr<Stmt> node(Stmt::Kind k, Pos p) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->pos = p;
    return s;
  }

  // Reads `{% name %}` (the end tag `body` stopped at).
  void end_tag(std::string_view name) {
    expect(Tok::BlockBegin, "'{%'");
    if (!skip_name(name)) error(peek().pos, "expected '" + std::string(name) + "'");
    expect(Tok::BlockEnd, "'%}'");
  }

  // After {%: one statement, through its end tag. nullptr for a tag that renders nothing.
  std::unique_ptr<Stmt> statement() {
    const Token& kw = peek();
    if (kw.kind != Tok::Name) error(kw.pos, "expected a statement name after '{%'");
    const std::string name = next().text;
    const Pos pos = kw.pos;
    if (name == "if") return if_stmt(pos);
    if (name == "for") return for_stmt(pos);
    if (name == "set") return set_stmt(pos);
    if (name == "macro") return macro_stmt(pos);
    if (name == "call") return call_stmt(pos);
    if (name == "filter") return filter_stmt(pos);
    if (name == "break" || name == "continue") {
      expect(Tok::BlockEnd, "'%}'");
      return node(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, pos);
    }
    if (name.starts_with("end") || name == "else" || name == "elif")
      error(pos, "unexpected '{% " + name + " %}': no open block ends or continues here");
    if (name == "generation") {  // transformers' marker of assistant text: renders its body
      expect(Tok::BlockEnd, "'%}'");
      auto s = node(Stmt::Kind::If, pos);
      auto yes = std::make_unique<Expr>();
      yes->kind = Expr::Kind::Literal;
      yes->value = Value(true);
      s->conditions.push_back(std::move(yes));
      s->bodies.push_back(body({"endgeneration"}));
      end_tag("endgeneration");
      return s;
    }
    error(pos, "unknown or unsupported tag '" + name + "'");
  }

  std::unique_ptr<Stmt> if_stmt(Pos pos) {
    auto s = node(Stmt::Kind::If, pos);
    s->conditions.push_back(tuple(true));
    expect(Tok::BlockEnd, "'%}'");
    for (;;) {
      s->bodies.push_back(body({"elif", "else", "endif"}));
      next();  // {%
      const std::string tag = next().text;
      if (tag == "elif") {
        s->conditions.push_back(tuple(true));
        expect(Tok::BlockEnd, "'%}'");
      } else if (tag == "else") {
        expect(Tok::BlockEnd, "'%}'");
        s->else_body = body({"endif"});
        end_tag("endif");
        return s;
      } else {
        expect(Tok::BlockEnd, "'%}'");
        return s;
      }
    }
  }

  // Assignment targets: `a`, `a, b`, `(a, b)`.
  void targets(Stmt& s) {
    const bool paren = skip_op("(");
    s.targets.push_back(expect_name());
    while (skip_op(",")) {
      s.unpack = true;
      if (paren && is_op(")")) break;
      s.targets.push_back(expect_name());
    }
    if (paren) {
      s.unpack = true;
      expect_op(")");
    }
  }

  std::unique_ptr<Stmt> for_stmt(Pos pos) {
    auto s = node(Stmt::Kind::For, pos);
    targets(*s);
    if (!skip_name("in")) error(peek().pos, "expected 'in' in a for loop");
    s->expr = tuple(false);
    if (skip_name("if")) s->cond = expression(true);
    if (skip_name("recursive")) error(pos, "recursive for loops are not supported");
    expect(Tok::BlockEnd, "'%}'");
    s->body = body({"endfor", "else"});
    next();
    if (next().text == "else") {
      expect(Tok::BlockEnd, "'%}'");
      s->else_body = body({"endfor"});
      end_tag("endfor");
    } else {
      expect(Tok::BlockEnd, "'%}'");
    }
    return s;
  }

  std::unique_ptr<Stmt> set_stmt(Pos pos) {
    auto s = node(Stmt::Kind::Set, pos);
    if (peek().kind == Tok::Name && is_op(".", 1)) {  // set ns.attr = value
      s->targets.push_back(next().text);
      next();
      s->text = expect_name();
    } else {
      targets(*s);
    }
    if (skip_op("=")) {
      s->expr = tuple(true);
      expect(Tok::BlockEnd, "'%}'");
      return s;
    }
    if (s->unpack || !s->text.empty()) error(peek().pos, "a block set takes one name");
    if (skip_op("|")) s->cond = filter_chain(nullptr);
    expect(Tok::BlockEnd, "'%}'");
    s->body = body({"endset"});
    end_tag("endset");
    return s;
  }

  void params(std::vector<Param>& out) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!out.empty()) expect_op(",");
      if (skip_op(")")) break;
      Param p{expect_name(), nullptr};
      if (skip_op("=")) p.default_value = expression(true);
      out.push_back(std::move(p));
    }
  }

  std::unique_ptr<Stmt> macro_stmt(Pos pos) {
    auto s = node(Stmt::Kind::Macro, pos);
    s->text = expect_name();
    params(s->params);
    expect(Tok::BlockEnd, "'%}'");
    s->body = body({"endmacro"});
    end_tag("endmacro");
    return s;
  }

  std::unique_ptr<Stmt> call_stmt(Pos pos) {
    auto s = node(Stmt::Kind::CallBlock, pos);
    if (is_op("(")) params(s->params);
    s->expr = expression(true);
    if (s->expr->kind != Expr::Kind::Call) error(pos, "{% call %} needs a call, e.g. {% call m() %}");
    expect(Tok::BlockEnd, "'%}'");
    s->body = body({"endcall"});
    end_tag("endcall");
    return s;
  }

  std::unique_ptr<Stmt> filter_stmt(Pos pos) {
    auto s = node(Stmt::Kind::FilterBlock, pos);
    s->expr = filter_chain(nullptr);
    expect(Tok::BlockEnd, "'%}'");
    s->body = body({"endfilter"});
    end_tag("endfilter");
    return s;
  }

  // ---- expressions ----
  ExprPtr make(Expr::Kind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // An expression, or several separated by commas: a tuple (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr tuple(bool with_condexpr) {
    const Pos pos = peek().pos;
    ExprPtr first = expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::TupleLiteral, pos);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == Tok::BlockEnd || peek().kind == Tok::VarEnd || is_op(")") || is_name("if")) break;
      t->items.push_back(expression(with_condexpr));
    }
    return t;
  }

  ExprPtr expression(bool with_condexpr) {
    Depth d(*this);
    ExprPtr e = or_expr();
    while (with_condexpr && is_name("if")) {
      const Pos pos = next().pos;
      auto t = make(Expr::Kind::Ternary, pos);
      t->a = std::move(e);
      t->b = or_expr();
      if (skip_name("else")) t->c = expression(true);
      e = std::move(t);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, Pos pos) {
    auto e = make(Expr::Kind::Binary, pos);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      const Pos p = next().pos;
      e = binary("or", std::move(e), and_expr(), p);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      const Pos p = next().pos;
      e = binary("and", std::move(e), not_expr(), p);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this);
      auto e = make(Expr::Kind::Unary, next().pos);
      e->name = "not";
      e->a = not_expr();
      return e;
    }
    return compare();
  }

  ExprPtr compare() {
    const Pos pos = peek().pos;
    ExprPtr first = math1();
    ExprPtr e;
    for (;;) {
      std::string op;
      if (peek().kind == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!e) {
        e = make(Expr::Kind::Compare, pos);
        e->items.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->items.push_back(math1());
    }
    return e ? std::move(e) : std::move(first);
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), concat(), t.pos);
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const Pos p = next().pos;
      e = binary("~", std::move(e), math2(), p);
    }
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), pow(), t.pos);
    }
    return e;
  }

  ExprPtr pow() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const Pos p = next().pos;
      e = binary("**", std::move(e), unary(true), p);
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    Depth d(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(Expr::Kind::Unary, t.pos);
      e->name = t.text;
      e->a = unary(false);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr literal(Value v, Pos p) {
    auto e = make(Expr::Kind::Literal, p);
    e->value = std::move(v);
    return e;
  }

  ExprPtr primary() {
    const Token& t = peek();
    const Pos pos = t.pos;
    switch (t.kind) {
      case Tok::Name: {
        const std::string n = next().text;
        if (n == "true" || n == "True") return literal(Value(true), pos);
        if (n == "false" || n == "False") return literal(Value(false), pos);
        if (n == "none" || n == "None") return literal(Value::none(), pos);
        auto e = make(Expr::Kind::Name, pos);
        e->name = n;
        return e;
      }
      case Tok::String: {
        std::string s = next().text;
        while (peek().kind == Tok::String) s += next().text;  // adjacent literals join, as in Python
        return literal(Value(std::move(s)), pos);
      }
      case Tok::Int: return literal(Value(next().int_value), pos);
      case Tok::Float: return literal(Value(next().float_value), pos);
      case Tok::Op: {
        if (skip_op("(")) {
          if (skip_op(")")) return make(Expr::Kind::TupleLiteral, pos);
          ExprPtr inner = tuple(true);
          expect_op(")");
          return inner;
        }
        if (skip_op("[")) {
          auto e = make(Expr::Kind::ListLiteral, pos);
          while (!skip_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (skip_op("]")) break;
            e->items.push_back(expression(true));
          }
          return e;
        }
        if (skip_op("{")) {
          auto e = make(Expr::Kind::DictLiteral, pos);
          while (!skip_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (skip_op("}")) break;
            e->items.push_back(expression(true));
            expect_op(":");
            e->items.push_back(expression(true));
          }
          return e;
        }
        break;
      }
      default: break;
    }
    error(pos, "expected an expression, found " + describe(t));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        const Pos p = next().pos;
        if (peek().kind == Tok::Int) {  // a.0 is a[0]
          auto idx = make(Expr::Kind::Index, p);
          idx->a = std::move(e);
          idx->b = literal(Value(next().int_value), p);
          e = std::move(idx);
          continue;
        }
        auto attr = make(Expr::Kind::Attr, p);
        attr->a = std::move(e);
        attr->name = expect_name();
        e = std::move(attr);
      } else if (is_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target) {
    const Pos pos = next().pos;  // [
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (is_op(":")) {
        next();
        slice = true;
        if (++n > 2) error(pos, "a slice takes at most start:stop:step");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) error(peek().pos, "expected ':' or ']' in a subscript");
      parts[n] = expression(true);
    }
    next();  // ]
    if (!slice) {
      if (!parts[0]) error(pos, "an empty subscript []");
      auto e = make(Expr::Kind::Index, pos);
      e->a = std::move(target);
      e->b = std::move(parts[0]);
      return e;
    }
    auto e = make(Expr::Kind::Slice, pos);
    e->a = std::move(target);
    for (auto& part : parts) e->items.push_back(std::move(part));
    return e;
  }

  // Arguments in parentheses: positional, then name=value.
  void arguments(Expr& e) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!e.items.empty() || !e.kwargs.empty()) expect_op(",");
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) error(peek().pos, "*args and **kwargs in calls are not supported");
      if (peek().kind == Tok::Name && is_op("=", 1)) {
        std::string k = next().text;
        next();
        e.kwargs.emplace_back(std::move(k), expression(true));
      } else {
        if (!e.kwargs.empty()) error(peek().pos, "a positional argument after a keyword argument");
        e.items.push_back(expression(true));
      }
    }
  }

  ExprPtr call(ExprPtr callee) {
    auto e = make(Expr::Kind::Call, peek().pos);
    e->a = std::move(callee);
    arguments(*e);
    return e;
  }

  // `| name(args)` filters, `is [not] name(args)` tests and calls after a value, in any order.
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        e = filter_chain(std::move(e), true);
      } else if (is_name("is")) {
        const Pos p = next().pos;
        auto t = make(Expr::Kind::Test, p);
        t->a = std::move(e);
        t->negated = skip_name("not");
        t->name = expect_name();
        if (is_op("(")) {
          arguments(*t);
        } else if ((peek().kind == Tok::Name || peek().kind == Tok::String || peek().kind == Tok::Int ||
                    peek().kind == Tok::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") && !is_name("in") &&
                   !is_name("not")) {
          t->items.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // One or more `name(args)` joined by `|` (the first `|` already read when `after_bar`).
  ExprPtr filter_chain(ExprPtr e, bool after_bar = false) {
    if (after_bar) next();
    for (;;) {
      auto f = make(Expr::Kind::Filter, peek().pos);
      f->a = std::move(e);
      f->name = expect_name();
      while (is_op(".") && peek(1).kind == Tok::Name) {  // dotted filter names
        next();
        f->name += "." + next().text;
      }
      if (is_op("(")) arguments(*f);
      e = std::move(f);
      if (!after_bar || !is_op("|")) {
        if (!after_bar && skip_op("|")) continue;
        return e;
      }
      next();
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Program parse(std::string_view source, const LexOptions& options) { return Parser(lex(source, options)).program(); }

}  // namespace weft::chat::jinja
